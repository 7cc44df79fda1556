"""The operator's view of the journal: every run, one run's history, what is in doubt.

- :mod:`.snapshot` reads (the list of runs; one run from a single snapshot);
- :mod:`.history` judges what was read (steps and verdicts, events, notes);
- :mod:`.views` holds the results as frozen dataclasses, and the time phrases;
- :mod:`.actions` changes a run (cancel, resolve, retry);
- :mod:`.text` and :mod:`.timeline` (with :mod:`.marks`) render them;
- :mod:`.commands` is the argparse side: ``runs``, ``show``, ``resolve``, ``cancel``,
  ``retry``.

The domain functions never see argparse; the commands only parse, call and print.
"""

from __future__ import annotations

from .actions import cancel_run, resolve_run, retry_run
from .history import assemble
from .snapshot import list_runs, read_history
from .views import RunHistory, RunList

__all__ = [
    "RunHistory",
    "RunList",
    "assemble",
    "cancel_run",
    "list_runs",
    "read_history",
    "resolve_run",
    "retry_run",
]
