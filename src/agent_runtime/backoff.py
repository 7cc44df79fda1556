"""How long to wait before trying again: exponential, capped, with jitter.

One rule for the three places the runtime waits: the model client between two attempts
at one question, the cloud client between two sends of one key, and a run released on a
resumable error before it may be claimed again (``runs.lease_expires_at``, compared with
``cr_now()``). The ``n``-th wait is ``min(cap, base * 2**(n-1))``, shortened by a random
part of at most :data:`JITTER` of itself ("equal jitter"), so runs stopped by one outage
do not all come back at the same instant, not even once they reach the cap. With
``JITTER = 0.5`` the waits never shrink from one attempt to the next while they grow:
wait ``n+1`` is at least ``base * 2**(n-1)``, the most wait ``n`` can be; at the cap
they stay between ``cap / 2`` and ``cap``.

The randomness (and, in the clients, the sleeping) is injected, so tests never sleep and
can predict every wait.

Why not tenacity: its jittered waits draw from the ``random`` module with no way to pass
a source in, and the run's backoff is not a retry loop but one delay written to the
database; the clients' loops (a response-dependent retry that must keep the same
idempotency key) are a few lines each.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import ConfigError

JITTER = 0.5  # at most this fraction of each wait is taken off at random
MAX_DOUBLINGS = 60  # 2**60 base periods is past any cap; keeps the arithmetic finite


def uniform() -> float:
    """A number in [0, 1): the default source of jitter."""
    return random.random()


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """Waits of ``base`` seconds, doubled per attempt up to ``cap``, minus some jitter."""

    base: float  # seconds before the first retry; 0: never wait
    cap: float  # seconds no wait exceeds
    jitter: float = JITTER
    rand: Callable[[], float] = field(default=uniform, compare=False)

    def __post_init__(self) -> None:
        for name in ("base", "cap"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"backoff {name} must be >= 0 seconds, got {value}")
        if not 0 <= self.jitter < 1:
            raise ConfigError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def ceiling(self, attempt: int) -> float:
        """The longest wait before retry ``attempt`` (1: the first retry)."""
        doublings = min(max(attempt, 1) - 1, MAX_DOUBLINGS)
        return min(self.cap, self.base * 2.0**doublings)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt``: the ceiling, less up to ``jitter`` of it."""
        ceiling = self.ceiling(attempt)
        draw = min(max(self.rand(), 0.0), 1.0)
        return ceiling * (1.0 - self.jitter * draw)
