-- B1 with wrk instead of bench/load.py (for comparing the two generators; see bench/README.md):
--   taskset -c 1 wrk -t1 -c32 -d10s --latency -s bench/wrk_echo.lua http://127.0.0.1:PORT/mcp
-- The same request bytes as bench/load.py sends: one stateless 2026-07-28 tools/call of echo.
wrk.method = "POST"
wrk.body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", '
  .. '"arguments": {"text": "0123456789abcdef"}, "_meta": {"io.modelcontextprotocol/protocolVersion": '
  .. '"2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}, '
  .. '"io.modelcontextprotocol/clientInfo": {"name": "longtools-bench", "version": "0"}}}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
