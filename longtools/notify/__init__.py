"""People and systems hear of a task: a question waits for them, still waits, was escalated, or the
task ended. Email and chat through Apprise, signed Standard Webhooks, durable and at least once.

One concept with one home, used by workflows (their notices), the worker (the notify workflow and its
activities) and the API (``NOTIFY_MEMO`` at a task's start):

- ``_notices``: a notice, its deliveries, and the words and webhook body it carries (pure data);
- ``_routes``: who hears of a notice, through what (the deployment's settings);
- ``_sending``: the activities that plan and send, for the notify workflow
  (``longtools.workflows.notify``).
"""

from longtools.notify._notices import (
    NOTIFICATIONS,
    NOTIFY_MEMO,
    NOTIFY_WORKFLOW,
    PLAN_ACTIVITY,
    SEND_ACTIVITY,
    Delivery,
    Notice,
    NoticeKind,
    Notified,
    Plan,
    SendInput,
    Sent,
)
from longtools.notify._routes import Routes
from longtools.notify._sending import Notifier

__all__ = [
    "NOTIFICATIONS",
    "NOTIFY_MEMO",
    "NOTIFY_WORKFLOW",
    "PLAN_ACTIVITY",
    "SEND_ACTIVITY",
    "Delivery",
    "Notice",
    "NoticeKind",
    "Notified",
    "Notifier",
    "Plan",
    "Routes",
    "SendInput",
    "Sent",
]
