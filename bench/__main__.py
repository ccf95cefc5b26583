"""``python -m bench [--quick] [--only B1,B2] [--impl floor,longtools]``: run the benchmark."""

from __future__ import annotations

import sys

from bench._harness import main

sys.exit(main())
