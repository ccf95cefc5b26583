"""One ``longtools serve`` per data dir, held for the life of its process. The ``serve`` command's process.

Two ``serve``s on one data dir would run two Temporal dev servers on one SQLite ``temporal.db``,
each believing it owns every task in it. So ``serve`` holds an exclusive ``flock`` on
``<data-dir>/serve.lock`` while it runs. The kernel drops the lock when the process ends, however
it ends (SIGKILL included), so a file left behind never blocks a start; the file only says who
holds the lock (its pid and command line), for the refusal to name it.

Taken in two steps, so that a refused start writes nothing: `DataDirLock` checks (and holds the lock
of an existing file) without writing; `DataDirLock.hold` creates what is missing and writes the pid,
once every other check of the command has passed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from pathlib import Path
from typing import Final

__all__ = ["LOCK_FILE", "DataDirInUse", "DataDirLock"]

LOCK_FILE: Final = "serve.lock"


class DataDirInUse(Exception):
    """Another ``longtools serve`` holds the data dir (one line for a person, naming it)."""


class DataDirLock:
    """The lock of ``data_dir``; held from construction if its file exists, else from `hold`.

    Raises:
        DataDirInUse: another process holds it.
        OSError: the lock file exists but cannot be opened.
    """

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir.absolute()
        self._path = self._dir / LOCK_FILE
        self._fd: int | None = None
        try:
            # Opening an existing file writes nothing; O_RDWR only so that hold() can write the pid.
            fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return  # no serve has held this dir yet (or it is no dir: hold() says so)
        self._take(fd)

    def hold(self) -> None:
        """Hold the lock (making the data dir, mode 0700, and the file when missing) and write the pid.

        Raises:
            DataDirInUse: another process took it since the check.
            OSError: the data dir or the file cannot be made or written.
        """
        if self._fd is None:
            # Private when made here: it will hold the key rings (keys.json) and what the tools store.
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._take(os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n{_command_line()}\n".encode(), 0)

    def _take(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirInUse(
                f"the data dir {self._dir} is in use by another `longtools serve` ({holder}): two would run"
                f" two Temporal servers on one temporal.db; stop that one first, or give this one another"
                " --data-dir (LONGTOOLS_DATA_DIR)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Let the lock go (the process's end does the same)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _command_line() -> str:
    # The command a person typed, by its name rather than the venv path the script runs from.
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "longtools serve"


def _holder(fd: int) -> str:
    """What the lock file says of the process holding it: "pid N: COMMAND"."""
    try:
        written = os.pread(fd, 4096, 0).decode(errors="replace").splitlines()
    except OSError:
        written = []
    if not written or not written[0].strip().isdigit():
        return "pid unknown: it is just starting"  # it holds the lock and has not written yet
    pid = written[0].strip()
    return f"pid {pid}: {written[1].strip()}" if len(written) > 1 and written[1].strip() else f"pid {pid}"
