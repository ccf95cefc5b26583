"""The bare Temporal floor of the task scenarios: ``execute_workflow`` of an empty workflow.

``python -m bench.servers.temporal_floor --temporal-address HOST:PORT`` (with longtools' venv, which
has ``temporalio``) reads a spec on stdin, as ``bench/task_load.py`` does, and prints one JSON
object with the same figures. It is client and worker in one process: one ``Worker`` with the
SDK's defaults on a task queue of its own, and the client that starts the workflows. There is no
MCP and no HTTP: what is left is what Temporal itself costs for a task that does nothing, against
the same dev server (same flags) as longtools' rows.

``execute_workflow`` is ``start_workflow`` then ``result()``; the two are called apart here so the
start (the floor of task creation) is timed too.

- ``latency`` (B3): ``execute_workflow`` one after another; ``warmup_ops``, then ``ops`` measured.
- ``throughput`` (B6): ``connections`` loops of ``execute_workflow`` at a time; the workflows that
  complete within ``duration_s`` after ``warmup_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.servers.floor_workflow import Empty
from bench.task_load import Flow, Meter, TaskSpec, closed_loop, figures

TASK_QUEUE = "bench-floor"


async def one(client: Client, eager: bool) -> Flow:
    started = time.perf_counter()
    handle = await client.start_workflow(
        Empty.run, id=f"floor-{uuid.uuid4()}", task_queue=TASK_QUEUE, request_eager_start=eager
    )
    created = time.perf_counter() - started
    await handle.result()
    return Flow(time.perf_counter() - started, created, 0, 0, False, [])


async def sequential(client: Client, spec: TaskSpec, eager: bool) -> dict[str, Any]:
    for _ in range(spec.warmup_ops):
        await one(client, eager)
    meter = Meter(spec)
    flows = [await one(client, eager) for _ in range(spec.ops)]
    return figures(flows, meter.stop())


async def run(address: str, spec: TaskSpec, eager: bool) -> dict[str, Any]:
    client = await Client.connect(address)
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Empty]):
        if spec.kind == "throughput":

            @asynccontextmanager
            async def connect() -> AsyncIterator[Callable[[], Awaitable[Flow]]]:
                yield partial(one, client, eager)  # all flows share the process's one client

            outcome = await closed_loop(spec, connect)
        else:
            outcome = await sequential(client, spec, eager)
    # This process is client and worker at once: its CPU is the row's "server" CPU (the Meter read
    # it as its own), and there is no separate generator.
    outcome.update(
        server_cpu_s=outcome["gen_cpu_s"],
        server_cpu_share=outcome["gen_cpu_share"],
        gen_cpu_s=0.0,
        gen_cpu_share=0.0,
        self_measured=True,
    )
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--temporal-address", required=True)
    # Eager start: the start response carries the first workflow task to this process's worker.
    parser.add_argument("--eager", action="store_true", help="start workflows with request_eager_start")
    args = parser.parse_args()
    spec = TaskSpec(**json.load(sys.stdin))
    try:
        outcome = asyncio.run(run(args.temporal_address, spec, args.eager))
    except Exception as exc:  # any failure is reported as a failed run
        outcome = {"ok": False, "problem": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(outcome) + "\n")
    sys.stdout.flush()
    # temporalio/sdk-python#300: a process that used the Rust core may abort while the interpreter
    # finalizes (exit 134) after its work is done; leave without finalizing.
    os._exit(0)


if __name__ == "__main__":
    main()
