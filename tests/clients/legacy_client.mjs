#!/usr/bin/env node
// A 2025-era MCP client driver: TypeScript SDK 1.x `Client` + `StreamableHTTPClientTransport`,
// plain `initialize` handshake (the SDK's own latest 2025 protocol version), nothing from 2026.
//
// Usage:  <node22> tests/clients/legacy_client.mjs <url> <script.json>
//
// script.json:
//   {
//     "token": "optional bearer token",
//     "capabilities": {"elicitation": {"form": {}}},          // client capabilities sent at initialize
//     "answers": [{"action": "accept", "content": {...}}],   // elicitation answers, given in order
//     "steps": [
//       {"op": "listTools"},
//       {"op": "callTool", "name": "...", "arguments": {...},
//        "progress": true, "meta": {...}, "timeoutMs": 600000}
//     ],
//     "terminate": false,  // optional: true sends the session DELETE (transport.terminateSession()) before close
//     "urlFile": "/path",  // optional: each URL-mode elicitation/create's params are appended to this file as
//                          // one JSON line, before it is answered (from "answers", like any other), so
//                          // that whoever runs the driver can open the URL while the call goes on
//     "urlAnswerGate": "/path"  // optional: the answer to each URL-mode elicitation/create waits until this
//                          // file exists (polled, at most 60 s, then the handler fails): a host whose dialog
//                          // stays open until its person is back from the page
//   }
//   Declare URL mode with "capabilities": {"elicitation": {"url": {}}} (or {"form": {}, "url": {}}):
//   the SDK refuses a mode that was not declared.
//
// Prints ONE JSON object on stdout:
//   {"sessionId", "protocolVersion", "serverInfo", "results": [per step: result | {"error": {code, message, data?}}],
//    "elicitations": [params of each elicitation/create received, with "step" and "seq"],
//    "progress": [each notifications/progress],
//    "notifications": [other server notifications: {"step", "seq", "method", "params"}],
//    "elicitationCompletes": [{"step", "seq", "elicitationId"}: each notifications/elicitation/complete, as the
//        SDK's ElicitationCompleteNotificationSchema parsed it (also listed in "notifications")],
//    "errors": [what the SDK reported through client.onerror, e.g. a notification that failed its schema],
//    "terminate": null | {"ok": true} | {"error": ...},
//    "connectError": absent | {code, message}}
// "seq" is one counter shared by elicitations and notifications, so their order can be compared.
// The SDK has no handler of its own for notifications/elicitation/complete (it would reach
// fallbackNotificationHandler unchecked); the driver registers one with the SDK's schema.
// Exit code 0 unless the driver itself crashes (bad usage or an unexpected exception: exit 2).
//
// The SDK is loaded from <repo>/conformance/node_modules (override with MCP_CONFORMANCE_DIR), by
// driver.mjs, which both drivers share.

import { appendFileSync } from 'node:fs';

import { errorOf, fileAppears, load, readArgs, run, transportFor } from './driver.mjs';

const { Client } = await load('client/index.js');
const { ElicitRequestSchema, ElicitationCompleteNotificationSchema, CallToolResultSchema } = await load('types.js');

const DEFAULT_TIMEOUT_MS = 600_000; // per call, restarted by every progress notification



async function main() {
  const { url, script } = readArgs('legacy_client');
  const capabilities = script.capabilities ?? {};
  const answers = [...(script.answers ?? [])];
  const steps = script.steps ?? [];

  const out = {
    sessionId: null,
    protocolVersion: null,
    serverInfo: null,
    results: [],
    elicitations: [],
    progress: [],
    notifications: [],
    elicitationCompletes: [],
    errors: [],
    terminate: null,
  };
  let currentStep = null;
  let seq = 0;

  const transport = transportFor(url, script);
  const client = new Client({ name: 'longtools-legacy-client', version: '1.0.0' }, { capabilities });

  // The SDK refuses to register an elicitation handler unless the capability is declared.
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      out.elicitations.push({ step: currentStep, seq: seq++, ...request.params });
      if (script.urlFile && request.params?.mode === 'url') {
        appendFileSync(script.urlFile, JSON.stringify(request.params) + '\n');
      }
      // A host that keeps its dialog open until its person is back: answer once the gate file exists.
      if (script.urlAnswerGate && request.params?.mode === 'url') await fileAppears(script.urlAnswerGate);
      // Out of scripted answers: cancel, as a user closing the dialog would.
      return answers.length ? answers.shift() : { action: 'cancel' };
    });
  }
  // notifications/elicitation/complete, checked by the SDK's own schema (a malformed one ends up
  // in "errors" instead).
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (notification) => {
    const at = seq++;
    out.elicitationCompletes.push({ step: currentStep, seq: at, elicitationId: notification.params.elicitationId });
    out.notifications.push({ step: currentStep, seq: at, method: notification.method, params: notification.params ?? null });
  });
  // Every other notification from the server (logging, list_changed, ...), for the record.
  client.fallbackNotificationHandler = async (notification) => {
    out.notifications.push({ step: currentStep, seq: seq++, method: notification.method, params: notification.params ?? null });
  };
  client.onerror = (e) => {
    out.errors.push({ step: currentStep, ...errorOf(e) });
  };

  try {
    await client.connect(transport);
  } catch (e) {
    out.connectError = errorOf(e);
    out.sessionId = transport.sessionId ?? null;
    process.stdout.write(JSON.stringify(out) + '\n');
    await client.close().catch(() => {});
    return;
  }

  // Record every notifications/progress as it arrives on the wire (token included), whether or
  // not a step asked for progress. Wrap after connect: Protocol.connect installs onmessage.
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message && message.method === 'notifications/progress' && !('id' in message)) {
      out.progress.push({ step: currentStep, ...message.params });
    }
    return onmessage(message, extra);
  };

  out.sessionId = transport.sessionId ?? null;
  out.protocolVersion = transport.protocolVersion ?? null;
  out.serverInfo = client.getServerVersion() ?? null;

  for (let i = 0; i < steps.length; i++) {
    const step = steps[i];
    currentStep = i;
    const options = {
      timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
    };
    if (step.progress) options.onprogress = () => {}; // makes the SDK send a progressToken
    try {
      let result;
      if (step.op === 'listTools') {
        result = await client.listTools(step.cursor ? { cursor: step.cursor } : undefined, options);
      } else if (step.op === 'callTool') {
        const params = { name: step.name, arguments: step.arguments ?? {} };
        if (step.meta) params._meta = step.meta;
        result = await client.callTool(params, CallToolResultSchema, options);
      } else {
        throw new Error(`unknown op ${JSON.stringify(step.op)}`);
      }
      out.results.push(result);
    } catch (e) {
      out.results.push({ error: errorOf(e) });
    }
  }
  currentStep = null;
  out.sessionId = transport.sessionId ?? out.sessionId;

  if (script.terminate) {
    try {
      await transport.terminateSession();
      out.terminate = { ok: true };
    } catch (e) {
      out.terminate = { error: errorOf(e) };
    }
  }
  await client.close().catch(() => {});
  process.stdout.write(JSON.stringify(out) + '\n');
}

await run('legacy_client', main);
