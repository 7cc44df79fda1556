"""Durations as people write them on a command line: ``90s``, ``15m``, ``12h``, ``30d``,
``2w``, or several in a row (``1d12h``). Used by ``prune`` and the supervisor's
``--prune-after`` (env ``PRUNE_AFTER``)."""

from __future__ import annotations

import re

from agent_runtime.errors import ConfigError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}  # seconds per unit
_PART = re.compile(r"(\d+)([smhdw])")
_WHOLE = re.compile(r"(?:\d+[smhdw])+")


def parse_duration(text: str, *, option: str) -> float:
    """Seconds in a duration such as ``30d`` or ``1h30m``; ConfigError naming ``option``."""
    value = text.strip().lower()
    if not _WHOLE.fullmatch(value):
        raise ConfigError(
            f"{option} {text!r} is not a duration: a whole number and a unit "
            f"({', '.join(UNITS)}), e.g. 30d, 12h or 1h30m"
        )
    return float(sum(int(n) * UNITS[unit] for n, unit in _PART.findall(value)))
