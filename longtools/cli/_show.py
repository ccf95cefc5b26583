"""``longtools task show TASK_ID``: a task's Temporal history with every payload decrypted. The
operator's process, beside the codec server.

A task is a workflow (task id = workflow id), and everything its history holds (arguments,
answers, results, the memo, failure messages) is encrypted with the payload key ring. This reads
the history and the workflow's description straight from Temporal, decrypts each payload with the
ring (``LONGTOOLS_PAYLOAD_KEYS`` or a ``serve`` data dir's keys.json, as the codec server finds it),
and prints it event by event: what failed and why, without the codec server, ``temporal workflow
show -o json`` and base64 by hand. It reads only; nothing is written to Temporal.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Iterator
from typing import Any, NoReturn

import typer
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from longtools._settings import Settings
from longtools.cli._launch import fail, payload_keys_of, settings_of
from longtools.notify import NOTIFY_WORKFLOW
from longtools.temporal import (
    DEFAULT_ADDRESS,
    ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    PayloadDecryptError,
)

_PAYLOAD = Payload.DESCRIPTOR.full_name
# Attributes every event of their kind carries and no one reading a failure needs.
_NOISE = frozenset(
    {"identity", "workerVersion", "sdkMetadata", "meteringMetadata", "header", "binaryChecksum", "requestId"}
)


def show(options: dict[str, Any], task_id: str, *, as_json: bool) -> NoReturn:
    """Print the task's decrypted history; one line and exit 1 when it cannot be read."""
    settings = settings_of(**options)
    raise typer.Exit(_show(settings, task_id, as_json=as_json))


def _show(settings: Settings, task_id: str, *, as_json: bool) -> int:
    codec = EncryptionCodec(payload_keys_of(settings))
    address = settings.temporal_address or DEFAULT_ADDRESS
    try:
        shown = asyncio.run(_read(address, settings.temporal_namespace, task_id, codec))
    except RuntimeError as exc:  # the SDK's "Failed client connect"
        fail(
            f"cannot reach Temporal at {address}: {exc}; is `longtools serve` running? "
            "Give its address with --temporal-address",
            code=1,
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            fail(
                f"no task {task_id} in namespace {settings.temporal_namespace!r} at {address} "
                "(a closed task is kept for the namespace's retention, 24 h on the dev server)",
                code=1,
            )
        fail(f"Temporal at {address} refused to show task {task_id}: {exc.status.name}: {exc}", code=1)
    if as_json:
        typer.echo(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        typer.echo(_text(shown))
    return 0


async def _read(address: str, namespace: str, task_id: str, codec: EncryptionCodec) -> dict[str, Any]:
    client = await Client.connect(address, namespace=namespace)  # raw payloads: decrypted below
    handle = client.get_workflow_handle(task_id)
    description = await handle.describe()
    history = await handle.fetch_history()
    events = [_event(event, codec) for event in history.events]
    raw = description.raw_description
    pending = []
    for activity in raw.pending_activities:
        _decrypt(activity, codec)
        shown = _readable(json_format.MessageToDict(activity))
        pending.append({key: value for key, value in shown.items() if key not in _NOISE})
    failure = next(
        (
            event["attributes"].get("failure")
            for event in reversed(events)
            if event["type"] == "WorkflowExecutionFailed"
        ),
        None,
    )
    return {
        "taskId": task_id,
        "runId": description.run_id,
        "notifications": [await _notification(client, child, codec) for child in _notify_children(events)],
        "workflowType": description.workflow_type,
        "status": description.status.name if description.status is not None else "UNKNOWN",
        "started": description.start_time.isoformat(),
        "closed": description.close_time.isoformat() if description.close_time else None,
        "memo": _memo(description, codec),
        "pendingActivities": pending,
        "events": events,
        "failure": failure,
    }


def _notify_children(events: list[dict[str, Any]]) -> list[str]:
    """The ids of the notify workflows the task started (``longtools.notify``)."""
    return [
        str(event["attributes"].get("workflowId"))
        for event in events
        if event["type"] == "StartChildWorkflowExecutionInitiated"
        and event["attributes"].get("workflowType", {}).get("name") == NOTIFY_WORKFLOW
    ]


async def _notification(client: Client, workflow_id: str, codec: EncryptionCodec) -> dict[str, Any]:
    """How one notification of the task stands: its tries still going (with the last error), or
    what became of each delivery once it is done."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
    except RPCError as exc:
        return {"id": workflow_id, "status": exc.status.name}
    shown: dict[str, Any] = {
        "id": workflow_id,
        "status": description.status.name if description.status is not None else "UNKNOWN",
    }
    tries = []
    for activity in description.raw_description.pending_activities:
        _decrypt(activity, codec)
        pending = _readable(json_format.MessageToDict(activity))
        tries.append({"attempt": pending.get("attempt", 1), "lastFailure": pending.get("lastFailure")})
    if tries:
        shown["sending"] = tries
    if description.close_time is not None:
        history = await handle.fetch_history()
        last = _event(history.events[-1], codec)
        result = last["attributes"].get("result")
        shown["result"] = result[0] if isinstance(result, list) and result else result
    return shown


def _memo(description: WorkflowExecutionDescription, codec: EncryptionCodec) -> dict[str, Any]:
    memo = description.raw_description.workflow_execution_info.memo
    _decrypt(memo, codec)
    fields = _readable(json_format.MessageToDict(memo)).get("fields", {})
    return dict(fields) if isinstance(fields, dict) else {}


def _event(event: HistoryEvent, codec: EncryptionCodec) -> dict[str, Any]:
    _decrypt(event, codec)
    kind = event.WhichOneof("attributes")
    attributes = getattr(event, kind) if kind else None
    shown = _readable(json_format.MessageToDict(attributes)) if attributes is not None else {}
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    return {
        "id": event.event_id,
        "time": event.event_time.ToDatetime().isoformat(timespec="milliseconds") + "Z",
        "type": "".join(part.capitalize() for part in name.split("_")),
        "attributes": {key: value for key, value in shown.items() if key not in _NOISE},
    }


def _decrypt(message: Message, codec: EncryptionCodec) -> None:
    """Decrypt every payload inside ``message`` in place; one that does not decrypt stays as it is."""
    for payload in _payloads(message):
        if payload.metadata.get("encoding") != ENCODING:
            continue  # plain by design (search attributes are indexed as they are), not a leak
        # One that does not decrypt shows as "<encrypted ...>" with its key id; the codec logged it.
        with contextlib.suppress(PayloadDecryptError):
            payload.CopyFrom(codec.decrypt(payload))


def _payloads(message: Message) -> Iterator[Payload]:
    if message.DESCRIPTOR.full_name == _PAYLOAD:
        assert isinstance(message, Payload)
        yield message
        return
    for field, value in message.ListFields():
        kind = field.message_type
        if field.type != FieldDescriptor.TYPE_MESSAGE or kind is None:
            continue
        if kind.GetOptions().map_entry:
            if kind.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for item in value.values():
                    yield from _payloads(item)
        elif field.is_repeated:
            for item in value:
                yield from _payloads(item)
        else:
            yield from _payloads(value)


def _readable(value: Any) -> Any:
    """A history's JSON form with each payload as the value it holds and each failure's message."""
    if isinstance(value, list):
        return [_readable(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) <= {"metadata", "data"} and "metadata" in value:
        return _payload_value(value)
    shown = {key: _readable(item) for key, item in value.items()}
    encoded = shown.pop("encodedAttributes", None)
    if isinstance(encoded, dict):  # a failure whose message and stack trace were encrypted
        shown["message"] = encoded.get("message", shown.get("message"))
        if encoded.get("stack_trace"):
            shown["stackTrace"] = encoded["stack_trace"]
    elif encoded is not None:
        shown["encodedAttributes"] = encoded
    if set(shown) == {"payloads"}:  # Payloads: the list of values is what a person reads
        return shown["payloads"]
    return shown


def _payload_value(payload: dict[str, Any]) -> Any:
    metadata = {key: _b64(item) for key, item in payload.get("metadata", {}).items()}
    data = base64.b64decode(payload.get("data", ""))
    encoding = metadata.get("encoding")
    if encoding == ENCODING.decode():
        return f"<encrypted with key id {metadata.get(KEY_ID_METADATA, '?')}, not in the key ring>"
    if encoding == "binary/null":
        return None
    if encoding == "json/plain":
        try:
            return json.loads(data)
        except ValueError:
            pass
    return {"encoding": encoding, "data": data.decode(errors="replace")}


def _b64(text: str) -> str:
    return base64.b64decode(text).decode(errors="replace")


def _text(shown: dict[str, Any]) -> str:
    lines = [
        f"task {shown['taskId']}: {shown['status']} ({shown['workflowType']}, run {shown['runId']})",
        f"started {shown['started']}" + (f", closed {shown['closed']}" if shown["closed"] else ""),
        f"memo: {_compact(shown['memo'])}",
    ]
    for activity in shown["pendingActivities"]:
        name = activity.get("activityType", {}).get("name", "?")
        last = activity.get("lastFailure")
        lines.append(
            f"pending activity {name}: {activity.get('state', '?')}, attempt {activity.get('attempt', 1)}"
            + (f", last failure: {_failure_line(last)}" if last else "")
        )
    for notification in shown["notifications"]:
        line = f"notification {notification['id']}: {notification['status']}"
        for sending in notification.get("sending", []):
            last = sending.get("lastFailure")
            line += f", try {sending['attempt']}" + (f", last failure: {_failure_line(last)}" if last else "")
        if "result" in notification:
            line += f", {_compact(notification['result'])}"
        lines.append(line)
    lines.append(f"history ({len(shown['events'])} events):")
    for event in shown["events"]:
        attributes = dict(event["attributes"])
        failure = attributes.pop("failure", None)
        summary = _compact(_without_stacks(attributes))
        line = f"{event['id']:>5}  {event['time']}  {event['type']}  {summary}"
        if failure is not None:
            line += f"\n{'':>7}failure: {_failure_line(failure)}"
        lines.append(line)
    if shown["failure"] is not None:
        lines.append(f"failure: {_failure_line(shown['failure'])}")
        cause: Any = shown["failure"]
        while isinstance(cause, dict):
            if cause.get("stackTrace"):
                lines.append(f"  stack trace of {_failure_kind(cause)}:")
                trace = str(cause["stackTrace"]).splitlines()
                lines += [f"    {line}" for line in trace if line.strip()]
            cause = cause.get("cause")
    return "\n".join(lines)


def _failure_line(failure: Any) -> str:
    """``Kind: message <- caused by Kind: message ...``, outermost first."""
    parts = []
    while isinstance(failure, dict):
        parts.append(f"{_failure_kind(failure)}: {failure.get('message', '')}")
        failure = failure.get("cause")
    return " <- caused by ".join(parts)


def _failure_kind(failure: dict[str, Any]) -> str:
    info = failure.get("applicationFailureInfo")
    if isinstance(info, dict) and info.get("type"):
        return str(info["type"])
    for key in failure:
        if key.endswith("FailureInfo"):
            return key.removesuffix("FailureInfo").capitalize() + "Failure"
    return "Failure"


def _without_stacks(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_stacks(item) for key, item in value.items() if key != "stackTrace"}
    if isinstance(value, list):
        return [_without_stacks(item) for item in value]
    return value


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
