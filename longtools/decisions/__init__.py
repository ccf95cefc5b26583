"""Decisions people can trust: who decides a question (approver rules, groups, quorums), what they
decide on (the proposal and its digest), the votes, deadlines, and the ledger of who decided what.

One concept with one home, used by workflows (``ask_form(..., by=Approvers(...))``), the API (votes,
links, ``tasks/get``), the pages (``/decisions``) and the CLI (``longtools audit``):

- ``_rules``: approver rules and voters; ``_groups``: who is in which group (API);
- ``_decision``: the proposal, a question's decision state, the outcomes a workflow handles;
- ``_ledger``: the hash-chained, signed entries, and their offline check;
- ``_deciding``: votes counted in the workflow that asked (workflow code; the workflow half of the
  ledger, which writes entries, is ``longtools.workflows._ledger``); ``_records``: what the
  workflow, the worker and the API share of it; ``_signing``: the worker signs;
- ``_reading``: the ledger read back from Temporal, and the tags ``/decisions`` finds tasks by (API).
"""

from longtools.decisions._deciding import Deciding, with_decision
from longtools.decisions._decision import (
    ANSWERED_META,
    DECISION_META,
    EXIT_STATES,
    REDACTED,
    Approved,
    Ballot,
    Decision,
    DecisionEnd,
    DecisionState,
    ExitState,
    Expired,
    Proposal,
    Rejected,
    Stamp,
    StepUp,
    Via,
    approvers_decision,
    asserted_challenge,
    decision_of,
    passkey_challenge,
    redacted,
    sensitive_fields,
    unstamped,
)
from longtools.decisions._groups import Groups
from longtools.decisions._ledger import (
    EntryKind,
    LedgerKeys,
    Verified,
    canonical,
    chain,
    digest_of,
    ledger_time,
    verify_entries,
)
from longtools.decisions._passkeys import passkey_problem
from longtools.decisions._reading import decider_names, decider_tags, read_ledger
from longtools.decisions._records import (
    DECIDERS_ATTRIBUTE,
    EXIT_MEMO,
    LEDGER_ACTIVITY,
    LEDGER_MEMO,
    SIGNED_MEMO,
    LedgerBatch,
    LedgerSigned,
)
from longtools.decisions._rules import Approvers, Escalation, Voter, name_of, names_of, parse_groups
from longtools.decisions._signing import Signer, ledger_keys, signing_activity, tag_ring

__all__ = [
    "ANSWERED_META",
    "DECIDERS_ATTRIBUTE",
    "DECISION_META",
    "EXIT_MEMO",
    "EXIT_STATES",
    "LEDGER_ACTIVITY",
    "LEDGER_MEMO",
    "REDACTED",
    "SIGNED_MEMO",
    "Approved",
    "Approvers",
    "Ballot",
    "Deciding",
    "Decision",
    "DecisionEnd",
    "DecisionState",
    "EntryKind",
    "Escalation",
    "ExitState",
    "Expired",
    "Groups",
    "LedgerBatch",
    "LedgerKeys",
    "LedgerSigned",
    "Proposal",
    "Rejected",
    "Signer",
    "Stamp",
    "StepUp",
    "Verified",
    "Via",
    "Voter",
    "approvers_decision",
    "asserted_challenge",
    "canonical",
    "chain",
    "decider_names",
    "decider_tags",
    "decision_of",
    "digest_of",
    "ledger_keys",
    "ledger_time",
    "name_of",
    "names_of",
    "parse_groups",
    "passkey_challenge",
    "passkey_problem",
    "read_ledger",
    "redacted",
    "sensitive_fields",
    "signing_activity",
    "tag_ring",
    "unstamped",
    "verify_entries",
    "with_decision",
]
