"""A per-caller rate limit (an API key, or a client address without keys): a token bucket per caller answering
``429`` with ``Retry-After``. Buckets live in this process: replicas count on their own."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}
_SPEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``rate`` requests per second on average, ``burst`` at once."""

    rate: float
    burst: int

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"the rate limit must be a positive number of requests per second, not {self.rate!r}")
        if self.burst < 1:
            raise ValueError(f"the rate burst must be at least 1, not {self.burst!r}")

    @classmethod
    def parse(cls, spec: str, burst: int | None = None) -> RateLimit:
        """``"10/s"``, ``"600/min"``, ``"1000/h"``: N requests per period (burst N unless given)."""
        match = _SPEC.match(spec.lower())
        if not match or match.group(2) not in _PERIODS or float(match.group(1)) <= 0:
            raise ValueError(f"invalid rate limit {spec!r}: write N/s, N/min or N/h, for example 10/s or 600/min")
        count = float(match.group(1))
        return cls(rate=count / _PERIODS[match.group(2)], burst=burst or max(1, math.floor(count)))

    def __str__(self) -> str:
        return f"{self.rate:g}/s (burst {self.burst})"


class RateLimiter:
    """Token buckets per caller identity; thread-safe."""

    #: Past this many buckets, the full ones are dropped (they would start full anyway).
    MAX_CALLERS = 10_000

    def __init__(self, limit: RateLimit, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # identity -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, identity: str) -> float:
        """Take a token for ``identity``: ``0`` when allowed, else the seconds until one is back."""
        rate, burst = self.limit.rate, float(self.limit.burst)
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(identity, (burst, now))
            tokens = min(burst, tokens + (now - at) * rate)
            if tokens >= 1.0:
                self._buckets[identity] = (tokens - 1.0, now)
                if len(self._buckets) > self.MAX_CALLERS:
                    for known, (left, when) in list(self._buckets.items()):
                        if left + (now - when) * rate >= burst:
                            del self._buckets[known]
                return 0.0
            self._buckets[identity] = (tokens, now)
            return (1.0 - tokens) / rate
