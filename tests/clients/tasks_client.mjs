#!/usr/bin/env node
// A 2025-11-25 MCP client driver for the experimental tasks API: TypeScript SDK 1.x `Client` +
// `StreamableHTTPClientTransport`, using `client.experimental.tasks.*` the way a host would
// (task-augmented tools/call, tasks/get, tasks/result, tasks/list, tasks/cancel), answering the
// elicitation/create requests a server pushes on a tasks/result stream.
//
// Usage:  <node22> tests/clients/tasks_client.mjs <url> <script.json>
//
// script.json:
//   {
//     "token": "optional bearer token",                      // sent as Authorization: Bearer ...
//     "capabilities": {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}},  // sent at initialize
//     "answers": [{"action": "accept", "content": {...}}],  // elicitation answers, given in order
//     "steps": [
//       {"op": "listTools"},
//       {"op": "callToolAsTask", "name": "...", "arguments": {...}, "ttl": 60000, "timeoutMs": 600000},
//       {"op": "createTask", "name": "...", "arguments": {...}, "ttl": 60000},
//       {"op": "getTask", "taskId": "<id>" | "$last"},
//       {"op": "taskResult", "taskId": "<id>" | "$last"},
//       {"op": "listTasks"},
//       {"op": "cancelTask", "taskId": "<id>" | "$last"},
//       {"op": "sleep", "ms": 500}
//     ],
//     "urlFile": "/path",  // optional: each URL-mode elicitation/create's params (raw, _meta included) are appended
//                          // to this file as one JSON line, before it is answered (from "answers", like any
//                          // other), so that whoever runs the driver can open the URL while the task goes on
//     "urlAnswerGate": "/path"  // optional: the answer to each URL-mode elicitation/create waits until this file
//                          // exists (polled, at most 60 s, then the handler fails): a host whose dialog stays
//                          // open until its person is back from the page
//   }
//   Declare URL mode with "capabilities": {"elicitation": {"url": {}}, ...} (or {"form": {}, "url": {}}): the
//   SDK refuses a mode that was not declared.
//   "$last" (also the default when taskId is absent) is the task id created most recently in this
//   run, by callToolAsTask or createTask. Every step takes "timeoutMs" (default 600000, applied to
//   each request the step sends, restarted by progress) and "progress": true (makes the SDK put a
//   progressToken on each of those requests). callToolAsTask / createTask take "ttl" (sent as
//   params.task.ttl; without it params.task is {}) or a whole "task" object, and "meta" (params._meta).
//
// What each op calls (SDK 1.32.2):
//   listTools       client.listTools()                       (also caches each tool's execution.taskSupport)
//   callToolAsTask  client.experimental.tasks.callToolStream(params, CallToolResultSchema, {task, ...})
//   createTask      client.request({method: 'tools/call', params}, CreateTaskResultSchema, {task, ...})
//                   (the SDK's own first call in callToolStream; the experimental API has no
//                   create-only helper)
//   getTask         client.experimental.tasks.getTask(taskId)
//   taskResult      client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)
//   listTasks       client.experimental.tasks.listTasks(cursor), following nextCursor to the end
//   cancelTask      client.experimental.tasks.cancelTask(taskId)
//
// Prints ONE JSON object on stdout:
//   {"sessionId", "protocolVersion", "serverInfo", "serverCapabilities",
//    "results": [per step: its result | {"error": {code, message, data?}}],
//        callToolAsTask: the final CallToolResult of the stream; createTask: the CreateTaskResult;
//        listTasks: {"pages": n, "taskIds": [...], "tasks": [...], "cursors": [each nextCursor followed]};
//        sleep: {}
//    "events": [{"step", "seq", "type": "created", "taskId", "task"} | {"step", "seq", "type": "status", "taskId", "status", "task"}
//               | {"step", "seq", "type": "result", "result"} | {"step", "seq", "type": "error", "error"}],
//        every message of each callToolAsTask stream, in order
//    "elicitations": [{"step", "seq", "id", "params", "relatedTask": <params._meta["io.modelcontextprotocol/related-task"]> | null,
//                      "answer"}],
//    "notifications": [{"step", "seq", "method", "params"}],   // every server notification (tasks/status, progress, logging, ...)
//    "elicitationCompletes": [{"step", "seq", "elicitationId"}], // each notifications/elicitation/complete, as the SDK's
//                                                                // ElicitationCompleteNotificationSchema parsed it
//    "errors": [{"step", code, message}],      // what the SDK reported through client.onerror (e.g. a notification
//                                              // that failed its schema)
//    "wire": [{"step", "seq", "dir": "out" | "in", "message"}], // every JSON-RPC message both ways, raw
//    "connectError": absent | {code, message}}
// "seq" is one counter shared by events, elicitations, notifications and wire, so their order can be compared.
// Exit code 0 unless the driver itself crashes (bad usage or an unexpected exception: exit 2).
//
// The SDK is loaded from <repo>/conformance/node_modules (override with MCP_CONFORMANCE_DIR), by
// driver.mjs, which both drivers share.

import { appendFileSync } from 'node:fs';

import { errorOf, fileAppears, load, readArgs, run, transportFor } from './driver.mjs';

const { Client } = await load('client/index.js');
const {
  ElicitRequestSchema,
  ElicitationCompleteNotificationSchema,
  CallToolResultSchema,
  CreateTaskResultSchema,
  RELATED_TASK_META_KEY,
} = await load('types.js');

const DEFAULT_TIMEOUT_MS = 600_000; // per request, restarted by every progress notification
const MAX_LIST_PAGES = 1000;



const clone = (v) => (v === undefined ? null : JSON.parse(JSON.stringify(v)));

async function main() {
  const { url, script } = readArgs('tasks_client');
  const capabilities = script.capabilities ?? {};
  const answers = [...(script.answers ?? [])];
  const steps = script.steps ?? [];

  const out = {
    sessionId: null,
    protocolVersion: null,
    serverInfo: null,
    serverCapabilities: null,
    results: [],
    events: [],
    elicitations: [],
    notifications: [],
    elicitationCompletes: [],
    errors: [],
    wire: [],
  };
  let currentStep = null;
  let seq = 0;
  let lastTaskId = null;
  const rawRequests = new Map(); // id of a server->client request -> its raw params

  const transport = transportFor(url, script);
  const client = new Client({ name: 'longtools-tasks-client', version: '1.0.0' }, { capabilities });

  // Record the wire both ways. Set before connect: Protocol.connect chains a pre-set onmessage,
  // and calls transport.send for everything it writes (requests, answers, notifications).
  transport.onmessage = (message) => {
    out.wire.push({ step: currentStep, seq: seq++, dir: 'in', message: clone(message) });
    if (message && typeof message.method === 'string') {
      if ('id' in message) rawRequests.set(message.id, message.params ?? null);
      else out.notifications.push({ step: currentStep, seq: seq++, method: message.method, params: clone(message.params) });
    }
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    out.wire.push({ step: currentStep, seq: seq++, dir: 'out', message: clone(message) });
    return send(message, options);
  };

  // The SDK refuses to register an elicitation handler unless the capability is declared.
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      const params = rawRequests.get(extra.requestId) ?? request.params;
      rawRequests.delete(extra.requestId);
      if (script.urlFile && params?.mode === 'url') {
        appendFileSync(script.urlFile, JSON.stringify(params) + '\n');
      }
      // A host that keeps its dialog open until its person is back: answer once the gate file exists.
      if (script.urlAnswerGate && params?.mode === 'url') await fileAppears(script.urlAnswerGate);
      // Out of scripted answers: cancel, as a user closing the dialog would.
      const answer = answers.length ? answers.shift() : { action: 'cancel' };
      out.elicitations.push({
        step: currentStep,
        seq: seq++,
        id: extra.requestId,
        params: clone(params),
        relatedTask: clone(params?._meta?.[RELATED_TASK_META_KEY]),
        answer: clone(answer),
      });
      return answer;
    });
  }

  // notifications/elicitation/complete, checked by the SDK's own schema (the SDK has no handler of
  // its own for it: unhandled, it would be dropped); "notifications" has it raw as well.
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, async (notification) => {
    out.elicitationCompletes.push({ step: currentStep, seq: seq++, elicitationId: notification.params.elicitationId });
  });
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

  out.sessionId = transport.sessionId ?? null;
  out.protocolVersion = transport.protocolVersion ?? null;
  out.serverInfo = client.getServerVersion() ?? null;
  out.serverCapabilities = client.getServerCapabilities() ?? null;

  const tasks = client.experimental.tasks;
  const taskIdOf = (step) => {
    const id = step.taskId ?? '$last';
    if (id !== '$last') return id;
    if (lastTaskId === null) throw new Error('"$last": no task was created yet in this run');
    return lastTaskId;
  };
  const taskParamsOf = (step) => step.task ?? (step.ttl !== undefined ? { ttl: step.ttl } : {});
  const toolParamsOf = (step) => {
    const params = { name: step.name, arguments: step.arguments ?? {} };
    if (step.meta) params._meta = step.meta;
    return params;
  };

  for (let i = 0; i < steps.length; i++) {
    const step = steps[i];
    currentStep = i;
    const options = { timeout: step.timeoutMs ?? DEFAULT_TIMEOUT_MS, resetTimeoutOnProgress: true };
    if (step.progress) options.onprogress = () => {}; // makes the SDK send a progressToken
    try {
      let result;
      switch (step.op) {
        case 'listTools':
          result = await client.listTools(step.cursor ? { cursor: step.cursor } : undefined, options);
          break;
        case 'callToolAsTask': {
          const stream = tasks.callToolStream(toolParamsOf(step), CallToolResultSchema, { ...options, task: taskParamsOf(step) });
          let taskId = null;
          for await (const message of stream) {
            const ev = { step: i, seq: seq++ };
            if (message.type === 'taskCreated') {
              taskId = lastTaskId = message.task.taskId;
              Object.assign(ev, { type: 'created', taskId, task: clone(message.task) });
            } else if (message.type === 'taskStatus') {
              Object.assign(ev, { type: 'status', taskId: message.task.taskId, status: message.task.status, task: clone(message.task) });
            } else if (message.type === 'result') {
              Object.assign(ev, { type: 'result', result: clone(message.result) });
              result = message.result;
            } else if (message.type === 'error') {
              Object.assign(ev, { type: 'error', error: errorOf(message.error) });
              result = { error: errorOf(message.error) };
            } else {
              Object.assign(ev, { type: String(message.type), message: clone(message) });
            }
            out.events.push(ev);
          }
          if (result === undefined) result = { error: { code: null, message: 'stream ended without result or error' } };
          break;
        }
        case 'createTask':
          result = await client.request(
            { method: 'tools/call', params: toolParamsOf(step) },
            CreateTaskResultSchema,
            { ...options, task: taskParamsOf(step) },
          );
          lastTaskId = result.task.taskId;
          break;
        case 'getTask':
          result = await tasks.getTask(taskIdOf(step), options);
          break;
        case 'taskResult':
          result = await tasks.getTaskResult(taskIdOf(step), CallToolResultSchema, options);
          break;
        case 'listTasks': {
          const all = [];
          const cursors = [];
          let cursor = step.cursor;
          let pages = 0;
          for (;;) {
            const page = await tasks.listTasks(cursor, options);
            pages++;
            all.push(...page.tasks);
            if (!page.nextCursor) break;
            if (cursors.includes(page.nextCursor) || pages >= MAX_LIST_PAGES) {
              throw new Error(`tasks/list does not end: nextCursor ${JSON.stringify(page.nextCursor)} after ${pages} pages`);
            }
            cursors.push(page.nextCursor);
            cursor = page.nextCursor;
          }
          result = { pages, taskIds: all.map((t) => t.taskId), tasks: all, cursors };
          break;
        }
        case 'cancelTask':
          result = await tasks.cancelTask(taskIdOf(step), options);
          break;
        case 'sleep':
          await new Promise((r) => setTimeout(r, step.ms ?? 0));
          result = {};
          break;
        default:
          throw new Error(`unknown op ${JSON.stringify(step.op)}`);
      }
      out.results.push(clone(result));
    } catch (e) {
      out.results.push({ error: errorOf(e) });
    }
  }
  currentStep = null;
  out.sessionId = transport.sessionId ?? out.sessionId;

  await client.close().catch(() => {});
  process.stdout.write(JSON.stringify(out) + '\n');
}

await run('tasks_client', main);
