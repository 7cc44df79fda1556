"""``python -m crashresume``: the same as the ``crashresume`` command."""

from __future__ import annotations

import sys

from crashresume.cli import main

if __name__ == "__main__":
    sys.exit(main())
