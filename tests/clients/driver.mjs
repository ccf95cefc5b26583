// What the client drivers share: the pinned TypeScript SDK, the command line and script, a client
// error as JSON, the transport with its bearer token, and the exit codes (0, or 2 on a crash).
//
// The SDK is loaded from <repo>/conformance/node_modules (override with MCP_CONFORMANCE_DIR).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const conformanceDir = process.env.MCP_CONFORMANCE_DIR ?? resolve(here, '..', '..', 'conformance');
const sdkDir = join(conformanceDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');

/** A module of the pinned SDK, by its path under dist/esm. */
export const load = (rel) => import(pathToFileURL(join(sdkDir, rel)).href);

const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

/** A thrown error as the drivers print it. */
export function errorOf(e) {
  const err = { code: e?.code ?? null, message: String(e?.message ?? e) };
  if (e?.data !== undefined) err.data = e.data;
  return err;
}

/** The url and the parsed script of `<driver> <url> <script.json>`; exit 2 on bad usage. */
export function readArgs(driver) {
  const [url, scriptPath] = process.argv.slice(2);
  if (!url || !scriptPath) {
    process.stderr.write(`usage: ${driver}.mjs <url> <script.json>\n`);
    process.exit(2);
  }
  return { url, script: JSON.parse(readFileSync(scriptPath, 'utf8')) };
}

/** A Streamable HTTP transport to `url`, sending the script's bearer token when it has one. */
export function transportFor(url, script) {
  const requestInit = {};
  if (script.token) requestInit.headers = { Authorization: `Bearer ${script.token}` };
  return new StreamableHTTPClientTransport(new URL(url), { requestInit });
}

/** Run the driver's main: exit 0 when it returns, 2 (with the stack on stderr) when it throws. */
export async function run(driver, main) {
  try {
    await main();
    process.exit(0);
  } catch (e) {
    process.stderr.write(`${driver} crashed: ${e?.stack ?? e}\n`);
    process.exit(2);
  }
}

const GATE_TIMEOUT_MS = 60_000; // how long an answer to a URL request waits for "urlAnswerGate"

/** Resolves once `path` exists (polled every 20 ms); throws after GATE_TIMEOUT_MS. */
export async function fileAppears(path) {
  const deadline = Date.now() + GATE_TIMEOUT_MS;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`urlAnswerGate ${path} did not appear within ${GATE_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
