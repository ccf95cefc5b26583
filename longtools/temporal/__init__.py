"""Temporal from every process: the client connection and its data converter, the encryption of
every stored payload and the key files that hold its keys, the worker that runs the registry's
workflows and activities, and the dev server that ``serve`` embeds. API, worker and codec-server
processes.

May import ``longtools.tools`` (the registry a worker serves), ``longtools._settings`` and
``longtools.workflows`` (the worker's interceptors); nothing of the wire.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from longtools.temporal._codec import (
        ENCODING,
        KEY_ID_METADATA,
        EncryptionCodec,
        PayloadDecryptError,
        key_id,
    )
    from longtools.temporal._connection import (
        DEFAULT_ADDRESS,
        Connection,
        NotConnected,
        connect,
        data_converter,
        unreachable,
    )
    from longtools.temporal._devserver import (
        DevServer,
        DevServerError,
        DevServerStart,
        start_dev_server,
        temporal_executable,
    )
    from longtools.temporal._keyfile import (
        KEY_FILE,
        KeyFileError,
        load_or_create,
        read_key_file,
    )
    from longtools.temporal._worker import (
        build_worker,
        task_interceptors,
    )

# Loaded on first use (PEP 562): `serve` launches the dev server through this package before it
# imports the Temporal SDK (seconds of a cold start), and the key file needs none of it either.
_HOME = {
    "ENCODING": "longtools.temporal._codec",
    "KEY_ID_METADATA": "longtools.temporal._codec",
    "EncryptionCodec": "longtools.temporal._codec",
    "PayloadDecryptError": "longtools.temporal._codec",
    "key_id": "longtools.temporal._codec",
    "Connection": "longtools.temporal._connection",
    "DEFAULT_ADDRESS": "longtools.temporal._connection",
    "NotConnected": "longtools.temporal._connection",
    "connect": "longtools.temporal._connection",
    "data_converter": "longtools.temporal._connection",
    "unreachable": "longtools.temporal._connection",
    "DevServer": "longtools.temporal._devserver",
    "DevServerError": "longtools.temporal._devserver",
    "DevServerStart": "longtools.temporal._devserver",
    "start_dev_server": "longtools.temporal._devserver",
    "temporal_executable": "longtools.temporal._devserver",
    "KEY_FILE": "longtools.temporal._keyfile",
    "KeyFileError": "longtools.temporal._keyfile",
    "load_or_create": "longtools.temporal._keyfile",
    "read_key_file": "longtools.temporal._keyfile",
    "build_worker": "longtools.temporal._worker",
    "task_interceptors": "longtools.temporal._worker",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'longtools.temporal' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_ADDRESS",
    "ENCODING",
    "KEY_FILE",
    "KEY_ID_METADATA",
    "Connection",
    "DevServer",
    "DevServerError",
    "DevServerStart",
    "EncryptionCodec",
    "KeyFileError",
    "NotConnected",
    "PayloadDecryptError",
    "build_worker",
    "connect",
    "data_converter",
    "key_id",
    "load_or_create",
    "read_key_file",
    "start_dev_server",
    "task_interceptors",
    "temporal_executable",
    "unreachable",
]
