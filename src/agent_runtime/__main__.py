"""``python -m agent_runtime``."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
