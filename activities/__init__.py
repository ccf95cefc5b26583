"""Temporal activities for long tools: every side effect, heartbeating, idempotent by operation id.

Runs in the Temporal worker process. Long tools arrive with the durable-tasks work.
"""
