"""Temporal workflow code for long tools: deterministic, no I/O, no clocks, no randomness.

Runs inside the Temporal worker's sandbox. Long tools arrive with the durable-tasks work.
"""
