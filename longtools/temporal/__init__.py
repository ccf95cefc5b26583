"""Temporal from every process: the client connection and its data converter, the encryption of
every stored payload and the key files that hold its keys, the worker that runs the registry's
workflows and activities, and the dev server that ``serve`` embeds. API, worker and codec-server
processes.

May import ``longtools.tools`` (the registry a worker serves), ``longtools._settings`` and
``longtools.workflows`` (the worker's interceptors); nothing of the wire.
"""

from __future__ import annotations

from longtools.temporal._codec import (
    ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    PayloadDecryptError,
    key_id,
)
from longtools.temporal._connection import (
    Connection,
    NotConnected,
    connect,
    data_converter,
    unreachable,
)
from longtools.temporal._devserver import DevServer, DevServerError, start_dev_server, temporal_executable
from longtools.temporal._keyfile import KEY_FILE, KeyFileError, load_or_create, read_key_file
from longtools.temporal._worker import build_worker

__all__ = [
    "ENCODING",
    "KEY_FILE",
    "KEY_ID_METADATA",
    "Connection",
    "DevServer",
    "DevServerError",
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
    "temporal_executable",
    "unreachable",
]
