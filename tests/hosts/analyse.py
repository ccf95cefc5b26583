"""What a run shows, read back from its logs: the era the host spoke, what it declared, how the
person's question met it on the wire and what it did with it, whether the link reached the model and
the screen, and whether the tickets closed once, with the person's answer.

It reports what it finds; nothing here expects any one behaviour of the server or the host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.hosts.harness import PERSON_REASON
from tests.hosts.standin import LINK, RELAYED

CAPS_META = "io.modelcontextprotocol/clientCapabilities"
VERSION_META = "io.modelcontextprotocol/protocolVersion"


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _messages(wire: list[dict[str, Any]]) -> list[tuple[float, str, int, dict[str, Any]]]:
    """Every JSON-RPC message on the wire, in order: (t, direction, http request id, message)."""
    out = []
    for entry in wire:
        for key in ("body", "sse"):
            value = entry.get(key)
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, dict) and item.get("jsonrpc"):
                    out.append((entry["t"], entry["dir"], entry["rid"], item))
    return out


def _caps(caps: Any) -> str:
    if not isinstance(caps, dict):
        return "?"
    parts = []
    for name, value in caps.items():
        if name == "extensions" and isinstance(value, dict):
            parts += [f"ext:{ext.rsplit('/', 1)[-1]}" for ext in value]
        elif name == "elicitation" and isinstance(value, dict):
            parts.append("elicitation{" + ",".join(value) + "}" if value else "elicitation{} (form)")
        elif name == "experimental" and isinstance(value, dict) and value:
            parts.append("experimental{" + ",".join(value) + "}")
        elif name != "experimental":
            parts.append(name)
    return ", ".join(parts) or "nothing"


def _describe_request(request: dict[str, Any]) -> str:
    method = request.get("method", "?")
    params = request.get("params") or {}
    if method == "elicitation/create":
        mode = params.get("mode")
        extra = []
        if mode == "url":
            extra.append("elicitationId" if "elicitationId" in params else "no elicitationId")
        return f"elicitation/create mode={mode or '(none: form)'}" + (
            f" [{', '.join(extra)}]" if extra else ""
        )
    return str(method)


def analyse(run_dir: Path) -> dict[str, Any]:
    result = json.loads((run_dir / "result.json").read_text())
    wire = _lines(run_dir / "wire.jsonl")
    model = _lines(run_dir / "model.jsonl")
    screen = (run_dir / "screen.txt").read_text(errors="replace") if (run_dir / "screen.txt").exists() else ""
    # A TUI's screen changes: what reached it is every snapshot, not only the last.
    snapshots = sorted((run_dir / "screens").glob("*.txt")) if (run_dir / "screens").exists() else []
    seen_on_screen = "\n".join([*(p.read_text(errors="replace") for p in snapshots), screen])
    messages = _messages(wire)
    # A response comes back on the HTTP exchange of its request (a POST's JSON or SSE body).
    by_exchange = {
        (rid, m.get("id")): m for _, d, rid, m in messages if d == "c2s" and "method" in m and "id" in m
    }

    # Era and declaration.
    era = "?"
    declared = "?"
    methods = [m.get("method") for _, d, _, m in messages if d == "c2s" and "method" in m]
    for _, d, rid, m in messages:
        if d == "c2s" and m.get("method") == "initialize":
            declared = _caps((m.get("params") or {}).get("capabilities"))
            asked = (m.get("params") or {}).get("protocolVersion")
            reply = next(
                (
                    r
                    for _, d2, rid2, r in messages
                    if d2 == "s2c" and rid2 == rid and r.get("id") == m.get("id") and "result" in r
                ),
                None,
            )
            era = (
                (reply or {}).get("result", {}).get("protocolVersion", f"asked {asked}")
                if reply
                else f"asked {asked}"
            )
            break
    calls = [
        (t, rid, m)
        for t, d, rid, m in messages
        if d == "c2s"
        and m.get("method") == "tools/call"
        and str((m.get("params") or {}).get("name", "")).endswith(result.get("call") or "bulk_close_tickets")
    ]
    if calls:
        meta = (calls[0][2].get("params") or {}).get("_meta") or {}
        if CAPS_META in meta:
            declared = _caps(meta[CAPS_META])
        if VERSION_META in meta:
            era = meta[VERSION_META]
        header = next(
            (
                e.get("headers", {}).get("mcp-protocol-version")
                for e in wire
                if e.get("rid") == calls[0][1] and e["dir"] == "c2s"
            ),
            None,
        )
        if era == "?" and header:
            era = header
    elif declared == "?":
        for _, d, _, m in messages:
            meta = ((m.get("params") or {}).get("_meta") or {}) if d == "c2s" else {}
            if CAPS_META in meta:
                declared = _caps(meta[CAPS_META])
                era = meta.get(VERSION_META, era)
                break

    # How the person's question met the host, in order, each with what the host did.
    story: list[str] = []

    def add(line: str) -> None:
        if not story or story[-1] != line:
            story.append(line)

    for t, d, rid, m in messages:
        if d == "s2c" and m.get("method") == "elicitation/create":
            reply = next(
                (
                    r
                    for t2, d2, _, r in messages
                    if d2 == "c2s" and t2 >= t and r.get("id") == m.get("id") and "method" not in r
                ),
                None,
            )
            if reply is None:
                said = "no answer"
            elif "error" in reply:
                said = f"error {reply['error'].get('code')}: {str(reply['error'].get('message'))[:160]}"
            else:
                said = f"answered {(reply.get('result') or {}).get('action')}"
            add(f"pushed {_describe_request(m)} -> {said}")
        elif d == "s2c" and "result" in m and isinstance(m["result"], dict):
            res = m["result"]
            asked = by_exchange.get((rid, m.get("id")), {})
            method = asked.get("method", "?")
            task = (
                res.get("task")
                if isinstance(res.get("task"), dict)
                else (res if "taskId" in res and "status" in res else None)
            )
            if res.get("resultType") == "input_required":
                kinds = (
                    ", ".join(_describe_request(r) for r in (res.get("inputRequests") or {}).values())
                    or "none"
                )
                add(f"{method}: MRTR input_required [{kinds}]")
            elif task is not None:
                kinds = ", ".join(_describe_request(r) for r in (task.get("inputRequests") or {}).values())
                msg = task.get("statusMessage") or ""
                bits = [f"status {task.get('status')}"]
                if "inputRequests" in task:
                    bits.append(f"inputRequests [{kinds or 'empty'}]")
                if LINK.search(msg):
                    bits.append("link in statusMessage")
                if LINK.search(json.dumps(task.get("_meta") or {})):
                    bits.append("link in _meta")
                add(f"{method}: task, {', '.join(bits)}")
            elif "content" in res or "structuredContent" in res:
                text = json.dumps(res.get("content"))
                name = ((asked.get("params") or {}).get("name")) or ""
                bits = []
                if res.get("isError"):
                    bits.append("isError")
                if LINK.search(text):
                    bits.append("link in text")
                if LINK.search(json.dumps(res.get("structuredContent") or {})):
                    bits.append("link in structuredContent")
                status = (
                    (res.get("structuredContent") or {}).get("status")
                    if isinstance(res.get("structuredContent"), dict)
                    else None
                )
                if status:
                    bits.append(f"task {status}")
                outcome = (
                    (res.get("structuredContent") or {}).get("outcome")
                    if isinstance(res.get("structuredContent"), dict)
                    else None
                )
                if outcome:
                    bits.append(f"outcome {outcome}")
                add(f"{method} {name}: result" + (f" ({', '.join(bits)})" if bits else ""))
        elif d == "s2c" and "error" in m:
            asked = by_exchange.get((rid, m.get("id")), {})
            error = m["error"]
            add(f"{asked.get('method', '?')}: error {error.get('code')} {str(error.get('message'))[:120]}")
        elif (
            d == "c2s"
            and m.get("method") in ("tools/call", "tasks/update")
            and "inputResponses" in (m.get("params") or {})
        ):
            responses = (m.get("params") or {}).get("inputResponses") or {}
            actions = ", ".join(
                f"{(v or {}).get('action')}" + (" +content" if (v or {}).get("content") else "")
                for v in responses.values()
            )
            add(f"host answered {m.get('method')} inputResponses: {actions}")

    # The model: the tool results it was given, and whether a link was in them.
    seen = [s for entry in model for s in entry.get("seen") or []]
    seen += [{"id": "(host notice)", "text": entry["notice"]} for entry in model if entry.get("notice")]
    unique_seen: list[dict[str, Any]] = []
    for s in seen:
        if s not in unique_seen:
            unique_seen.append(s)
    link_to_model = any(LINK.search(s.get("text", "")) for s in unique_seen)
    tools_offered = list(
        dict.fromkeys(name for entry in model for name in (entry.get("turn") or {}).get("tools") or [])
    )
    lt_tools = [
        name for name in tools_offered if re.search(r"bulk_close|task_|ticket|echo|mailbox|probe_", name)
    ]
    model_calls = [
        entry["reply"]["call"]["name"] for entry in model if (entry.get("reply") or {}).get("call")
    ]

    # Whose each link on the screen was: the model's (after its RELAYED mark, maybe wrapped onto the
    # next line) or the host's own (a tool result, a dialog, a status line).
    flat = re.sub(r"\s+", " ", seen_on_screen)
    sent = {link for e in wire if e.get("dir") == "s2c" for link in LINK.findall(json.dumps(e))}
    whose: set[str] = set()
    for found in LINK.finditer(flat):
        link = found.group(0)
        before = flat[max(0, found.start() - len(RELAYED) - 3) : found.start()].rstrip()
        if before.endswith(RELAYED):
            whose.add("the model's text")
        elif link in sent or not sent:
            whose.add("the host itself")
        elif any(other.startswith(link) for other in sent):
            whose.add("the host itself, but cut off (wrapped or truncated)")
        else:
            whose.add("the host itself (a link not seen on the wire)")
    order = [
        "the host itself",
        "the host itself, but cut off (wrapped or truncated)",
        "the host itself (a link not seen on the wire)",
        "the model's text",
    ]
    shown_by = " and ".join(who for who in order if who in whose)
    link_on_screen = bool(whose)
    person = result.get("person") or []
    tickets = result.get("tickets") or []
    acme = [t for t in tickets if t.get("customer") == "acme"]
    if not acme:
        closed = "? (no tickets read)"
    elif all(t["status"] == "closed" for t in acme):
        once = all(t["closed_events"] == 1 for t in acme) and len({t["closed_by"] for t in acme}) == 1
        by_person = all(t["reason"] == PERSON_REASON for t in acme)
        closed = ("yes, once" if once else "closed, NOT once") + (
            "" if by_person else f", NOT with the person's answer (reason {acme[0]['reason']})"
        )
    elif any(t["status"] == "closed" for t in acme):
        closed = "partly: " + ", ".join(f"{t['id']} {t['status']}" for t in acme)
    else:
        closed = "no"
    answered = next((p for p in person if p.get("sent")), None)
    person_did = (
        f"answered on the page (link seen on the {answered['seen_in']})"
        if answered
        else ("tried: " + json.dumps(person[0])[:200] if person else "never saw a link")
    )
    tail = [line for line in screen.strip().splitlines() if line.strip()][-6:]
    if result.get("probe"):
        closed = "n/a (probe)"
    elif (result.get("call") or "bulk_close_tickets") != "bulk_close_tickets":
        closed = f"n/a (called {result['call']})"
    row = {
        "host": result.get("title")
        + (f" [probe {result['probe']}]" if result.get("probe") else "")
        + (
            f" [calls {result['call']}]"
            if (result.get("call") or "bulk_close_tickets") != "bulk_close_tickets"
            else ""
        ),
        "id": result.get("host"),
        "version": result.get("version"),
        "era": era,
        "declared": declared,
        "question": story,
        "tools_to_model": lt_tools,
        "model_called": model_calls,
        "tool_results_to_model": [s.get("text", "")[:400] for s in unique_seen],
        "link_to_model": link_to_model,
        "link_on_screen": link_on_screen,
        "link_on_screen_by": shown_by,
        "person": person_did,
        "tickets_closed_once": closed,
        "exit": result.get("exit"),
        "screen_tail": tail,
        "methods": sorted(set(filter(None, methods))),
        "errors": [result["harness_error"]] if result.get("harness_error") else [],
        "elapsed_s": result.get("elapsed_s"),
    }
    row["summary"] = (
        f"era {era}; declared {declared}; link to model: {'yes' if link_to_model else 'no'}, "
        f"on screen: {'yes (' + shown_by + ')' if link_on_screen else 'no'}; tickets closed once: {closed}"
    )
    (run_dir / "analysis.json").write_text(json.dumps(row, indent=2))
    return row


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict[str, Any]]) -> str:
    head = [
        "| host | version | era it spoke | declared | the person's question, as it met it (wire) "
        "| link reached the model | link reached the screen "
        "| tickets closed once (with the person's answer) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        story = "; ".join(row["question"]) or "(nothing on the wire)"
        head.append(
            "| "
            + " | ".join(
                _cell(str(x))
                for x in (
                    row["host"],
                    row["version"],
                    row["era"],
                    row["declared"],
                    story,
                    "yes"
                    if row["link_to_model"]
                    else ("no" if row["tools_to_model"] or row["model_called"] else "n/a (no model)"),
                    f"yes: {row.get('link_on_screen_by')}" if row["link_on_screen"] else "no",
                    row["tickets_closed_once"],
                )
            )
            + " |"
        )
    details = ["", "## Per host", ""]
    for row in rows:
        details.append(f"### {row['host']} {row['version']}")
        details.append(f"- exit: {row['exit']}; {row['elapsed_s']} s; person: {row['person']}")
        details.append(f"- MCP methods it sent: {', '.join(row['methods']) or 'none'}")
        if row["tools_to_model"] or row["model_called"]:
            offered = ", ".join(row["tools_to_model"]) or "none"
            called = ", ".join(row["model_called"]) or "nothing"
            details.append(f"- longtools tools the model was offered: {offered}; it called: {called}")
        for text in row["tool_results_to_model"]:
            details.append(f"- a tool result as the model got it: `{_cell(text)[:300]}`")
        details.append("- last lines on the screen:")
        details.append("```")
        details.extend(line[:200] for line in row["screen_tail"])
        details.append("```")
        for error in row["errors"]:
            details.append(f"- harness error: {error}")
        details.append("")
    return "\n".join(head + details)
