"""Real MCP hosts driven headless against a real `longtools serve` (see README.md); not part of ./dev test."""
