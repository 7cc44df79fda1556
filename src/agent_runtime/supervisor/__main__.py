"""``python -m agent_runtime.supervisor``."""

from agent_runtime.supervisor.main import main

raise SystemExit(main())
