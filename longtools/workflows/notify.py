"""The notify workflow: one notice, told to everyone who should hear of it. Workflow code.

A task's workflow starts one per notice as a child it does not wait for (``parent_close_policy``
abandon: the end of the task is told after the task has ended), under an id made of the task's id
and the notice's: Temporal starts it once, a replay of the task does not start it again, and a crash
of any process loses nothing, since the plan and every try are in its own history. Each delivery is
tried with backoff until it goes out or ``notify_give_up_s`` passes; a delivery that never goes out
fails only itself, never the task or another delivery.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from longtools.notify import (
        NOTIFICATIONS,
        NOTIFY_WORKFLOW,
        PLAN_ACTIVITY,
        SEND_ACTIVITY,
        Delivery,
        Notice,
        Notified,
        Plan,
        SendInput,
        Sent,
    )

__all__ = ["NotifyWorkflow"]

_SEND_TIMEOUT = timedelta(seconds=15)
"""One try: a webhook's 10 s and an SMTP exchange fit; a worker killed mid-try is retried after it."""


@workflow.defn(name=NOTIFY_WORKFLOW)
class NotifyWorkflow:
    @workflow.run
    async def run(self, notice: Notice) -> Notified:
        plan = await workflow.execute_activity(
            PLAN_ACTIVITY,
            notice,
            result_type=Plan,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
        )
        errors = await asyncio.gather(*(self._send(notice, delivery, plan) for delivery in plan.deliveries))
        done = Notified()
        for delivery, error in zip(plan.deliveries, errors, strict=True):
            if error is None:
                done.sent.append(delivery.to)
            else:
                done.failed[delivery.to] = error
        return done

    async def _send(self, notice: Notice, delivery: Delivery, plan: Plan) -> str | None:
        try:
            await workflow.execute_activity(
                SEND_ACTIVITY,
                SendInput(notice=notice, delivery=delivery),
                result_type=Sent,
                start_to_close_timeout=_SEND_TIMEOUT,
                schedule_to_close_timeout=timedelta(seconds=plan.give_up_s),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=max(1.0, plan.retry_max_s)),
                ),
            )
        except ActivityError as exc:
            cause = exc.cause
            error = getattr(cause, "message", None) or str(cause or exc)
            workflow.metric_meter().create_counter(NOTIFICATIONS, "Notifications sent or failed").add(
                1, {"channel": delivery.channel, "outcome": "failed"}
            )
            workflow.logger.warning("notification given up: %s", error)
            return str(error)
        return None
