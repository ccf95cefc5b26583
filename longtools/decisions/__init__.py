"""Decisions people can trust: who decides a question (approver rules, groups, quorums), what they
decide on (the proposal and its digest), the votes, deadlines, and the ledger of who decided what.

One concept with one home, used by workflows (``ask_form(..., by=Approvers(...))``), the API (votes,
links, ``tasks/get``), the pages (``/decisions``) and the CLI (``longtools audit``):

- ``_rules``: approver rules and voters; ``_groups``: who is in which group (API);
- ``_decision``: the proposal, a question's decision state, the outcomes a workflow handles;
- ``_ledger``: the hash-chained, signed entries, and their offline check;
- ``_recording``: the ledger as a workflow keeps it (workflow code), ``_signing``: the worker signs;
- ``_reading``: the ledger read back from Temporal, and the tags ``/decisions`` finds tasks by (API).
"""

# The workflows package first: ``_recording`` needs two of its modules, and ``longtools.workflows``
# needs ours (its ``ask_form`` decides); loaded in this order, neither meets the other half-made.
import longtools.workflows  # noqa: F401  isort: skip
from longtools.decisions._decision import (
    ANSWERED_META,
    DECISION_META,
    EXIT_STATES,
    REDACTED,
    Approved,
    Ballot,
    Decision,
    DecisionState,
    ExitState,
    Expired,
    Proposal,
    Rejected,
    Stamp,
    Via,
    decision_of,
    redacted,
)
from longtools.decisions._groups import Groups
from longtools.decisions._ledger import LedgerKeys, Verified, canonical, digest_of, verify_entries
from longtools.decisions._reading import decider_names, decider_tags, read_ledger
from longtools.decisions._recording import (
    DECIDERS_ATTRIBUTE,
    EXIT_MEMO,
    LEDGER_ACTIVITY,
    RecordLedger,
    requester,
)
from longtools.decisions._rules import Approvers, Escalation, Voter, name_of, names_of, parse_groups
from longtools.decisions._signing import ledger_keys, signing_activity, tag_ring

__all__ = [
    "ANSWERED_META",
    "DECIDERS_ATTRIBUTE",
    "DECISION_META",
    "EXIT_MEMO",
    "EXIT_STATES",
    "LEDGER_ACTIVITY",
    "REDACTED",
    "Approved",
    "Approvers",
    "Ballot",
    "Decision",
    "DecisionState",
    "Escalation",
    "ExitState",
    "Expired",
    "Groups",
    "LedgerKeys",
    "Proposal",
    "RecordLedger",
    "Rejected",
    "Stamp",
    "Verified",
    "Via",
    "Voter",
    "canonical",
    "decider_names",
    "decider_tags",
    "decision_of",
    "digest_of",
    "ledger_keys",
    "name_of",
    "names_of",
    "parse_groups",
    "read_ledger",
    "redacted",
    "requester",
    "signing_activity",
    "tag_ring",
    "verify_entries",
]
