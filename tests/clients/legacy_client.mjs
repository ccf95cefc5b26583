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
//     "terminate": false   // optional: true sends the session DELETE (transport.terminateSession()) before close
//   }
//
// Prints ONE JSON object on stdout:
//   {"sessionId", "protocolVersion", "serverInfo", "results": [per step: result | {"error": {code, message, data?}}],
//    "elicitations": [params of each elicitation/create received], "progress": [each notifications/progress],
//    "notifications": [other server notifications], "terminate": null | {"ok": true} | {"error": ...},
//    "connectError": absent | {code, message}}
// Exit code 0 unless the driver itself crashes (bad usage or an unexpected exception: exit 2).
//
// The SDK is loaded from <repo>/conformance/node_modules (override with MCP_CONFORMANCE_DIR), by
// driver.mjs, which both drivers share.

import { errorOf, load, readArgs, run, transportFor } from './driver.mjs';

const { Client } = await load('client/index.js');
const { ElicitRequestSchema, CallToolResultSchema } = await load('types.js');

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
    terminate: null,
  };
  let currentStep = null;

  const transport = transportFor(url, script);
  const client = new Client({ name: 'longtools-legacy-client', version: '1.0.0' }, { capabilities });

  // The SDK refuses to register an elicitation handler unless the capability is declared.
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      out.elicitations.push({ step: currentStep, ...request.params });
      // Out of scripted answers: cancel, as a user closing the dialog would.
      return answers.length ? answers.shift() : { action: 'cancel' };
    });
  }
  // Every other notification from the server (logging, list_changed, ...), for the record.
  client.fallbackNotificationHandler = async (notification) => {
    out.notifications.push({ step: currentStep, method: notification.method, params: notification.params ?? null });
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
