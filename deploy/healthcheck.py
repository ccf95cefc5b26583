"""The image's HEALTHCHECK: exit 0 when ``GET /healthz`` on this container answers 200, else 1.

/healthz answers 503 while Temporal is unreachable, so an API that cannot serve tools is reported
unhealthy. The port is LONGTOOLS_PORT (8000 by default); the slim image has no curl, hence Python.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    host = os.environ.get("LONGTOOLS_HOST", "127.0.0.1")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    url = f"http://{host}:{os.environ.get('LONGTOOLS_PORT', '8000')}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except (OSError, ValueError) as exc:  # URLError and HTTPError (503) are OSErrors
        print(f"{url}: {exc}", file=sys.stderr)  # noqa: T201
        return 1


if __name__ == "__main__":
    sys.exit(main())
