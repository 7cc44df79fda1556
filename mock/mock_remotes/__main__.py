"""`python -m mock_remotes [DATA_DIR] [--cloud-port 8001] [--model-port 8002] ...`."""

from __future__ import annotations

from mock_remotes.cli import main

raise SystemExit(main())
