"""The image's HEALTHCHECK: exit 0 when ``GET /livez`` on this container answers 200, else 1.

Liveness, not readiness: /livez answers 200 while the process serves and never asks Temporal, so
a Temporal outage does not get every API replica restarted by whatever acts on this check.
``python healthcheck.py /readyz`` checks readiness instead (200 only while Temporal answers), for
an orchestrator's readiness probe. The port is LONGTOOLS_PORT (8000 by default); the slim image
has no curl, hence Python.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

LIVENESS_PATH = "/livez"
READINESS_PATH = "/readyz"


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else LIVENESS_PATH
    if path not in (LIVENESS_PATH, READINESS_PATH):
        print(f"usage: healthcheck.py [{LIVENESS_PATH}|{READINESS_PATH}]", file=sys.stderr)  # noqa: T201
        return 2
    host = os.environ.get("LONGTOOLS_HOST", "127.0.0.1")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    url = f"http://{host}:{os.environ.get('LONGTOOLS_PORT', '8000')}{path}"
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except (OSError, ValueError) as exc:  # URLError and HTTPError (503) are OSErrors
        print(f"{url}: {exc}", file=sys.stderr)  # noqa: T201
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
