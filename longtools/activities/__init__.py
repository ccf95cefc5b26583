"""Temporal activities of the long tools: every side effect, heartbeating, idempotent by operation id.

Runs in the worker process (``helpdesk``: the ticket store the helpdesk tools share with the API).
"""
