"""Very long tasks (``--tools tests.long_tools``): many steps, many questions, continue-as-new.

``steps`` runs one activity per step and reports its progress after each; ``questions`` asks one
number at a time and adds them up. Given ``every``, each continues as new after that many, the
way a tool author keeps a task's history short; longtools carries the task's question keys, its
progress and its creation time into the next run.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from longtools import Registry, Settings
    from longtools.workflows import ask_form, report


class Steps(BaseModel):
    count: int
    every: int = 0
    done: int = 0


class Questions(BaseModel):
    count: int
    every: int = 0
    done: int = 0
    total: int = 0


class Number(BaseModel):
    value: int


@activity.defn(name="tests.step")
async def step(number: int) -> int:
    return number


@workflow.defn(name="tests.steps")
class ManySteps:
    @workflow.run
    async def run(self, args: Steps) -> str:
        done = args.done
        while done < args.count:
            if args.every and done > args.done and (done - args.done) % args.every == 0:
                workflow.continue_as_new(args.model_copy(update={"done": done}))
            done = await workflow.execute_activity(
                "tests.step", done + 1, start_to_close_timeout=timedelta(seconds=30), result_type=int
            )
            report(f"Step {done} of {args.count}")
        return f"done {done} steps"


@workflow.defn(name="tests.questions")
class ManyQuestions:
    @workflow.run
    async def run(self, args: Questions) -> int:
        done, total = args.done, args.total
        while done < args.count:
            if args.every and done > args.done and (done - args.done) % args.every == 0:
                workflow.continue_as_new(args.model_copy(update={"done": done, "total": total}))
            answer = await ask_form(f"Number {done + 1} of {args.count}?", Number)
            total += answer.content.value if answer.content is not None else 0
            done += 1
            report(f"{done} of {args.count} answered")
        return total


def register(registry: Registry, settings: Settings) -> None:
    registry.long_tool("steps", workflow=ManySteps, input=Steps)
    registry.long_tool("questions", workflow=ManyQuestions, input=Questions)
    registry.add_activities(step)
