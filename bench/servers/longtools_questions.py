"""``three_questions``' workflow (B4), written plainly, as docs/writing-tools.md shows. Worker.

Three times, an activity does 2 s of work and then ``ask_form`` asks one question. The workflow
waits for each answer where it is; nothing is run again after one.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench.servers.longtools_activities import (
        QUESTIONS,
        WORK_S,
        ConfirmForm,
        QuestionsInput,
        QuestionsOutput,
        work,
    )
    from longtools.workflows import ask_form


@workflow.defn(name="bench.three_questions")
class ThreeQuestions:
    """Do 2 s of work before each of three questions; return how many were confirmed."""

    @workflow.run
    async def run(self, args: QuestionsInput) -> QuestionsOutput:
        confirmed = 0
        for number in range(1, QUESTIONS + 1):
            await workflow.execute_activity(work, WORK_S, start_to_close_timeout=timedelta(seconds=30))
            answer = await ask_form(f"Go on after step {number}?", ConfirmForm)
            if answer.content is not None and answer.content.confirm:
                confirmed += 1
        return QuestionsOutput(confirmed=confirmed)
