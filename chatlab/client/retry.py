"""Safe retries of no answer (but not a refused TLS certificate: that will not pass by itself) and of 429, 502-504,
after backoff with jitter or a longer ``Retry-After``; a retried ``POST`` carries an ``Idempotency-Key``."""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

log = logging.getLogger("chatlab.retry")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
_WILL_NOT_PASS = (ssl.SSLCertVerificationError, httpx.UnsupportedProtocol)  # a refused certificate, not http(s)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry transient failures."""

    attempts: int = 4  #: tries in all, the first included (1: never retry)
    backoff: float = 0.25  #: the first wait in seconds; it doubles with each retry (with jitter)
    max_backoff: float = 4.0  #: the longest wait between two attempts, unless ``Retry-After`` asks for more
    max_retry_after: float = 30.0  #: the longest ``Retry-After`` honoured; a longer one ends the retries
    #: how to wait (tests may record the waits)
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False, compare=False)
    #: how the blocking client (:class:`~chatlab.client.http.ChatHistoryClient`) waits
    sleep_sync: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1 (1: no retries), not {self.attempts!r}")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError("backoff, max_backoff and max_retry_after must not be negative")

    def delay(self, retry: int) -> float:
        """The backoff before retry number ``retry`` (1, 2, ...): half fixed, half random."""
        base: float = min(self.max_backoff, self.backoff * 2.0 ** (retry - 1))
        return base / 2 + random.uniform(0, base / 2)

    def wait_after_error(self, attempt: int, exc: httpx.HTTPError, what: str) -> float | None:
        """How long to wait before retrying after no answer; ``None``: give up."""
        if attempt >= self.attempts or not isinstance(exc, httpx.TransportError):
            return None
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, _WILL_NOT_PASS) or "CERTIFICATE_VERIFY_FAILED" in str(cause):
                return None
            cause = cause.__cause__ or cause.__context__
        wait = self.delay(attempt)
        log.info(
            "%s: no answer (%s); retry %d of %d in %.2f s", what, type(exc).__name__, attempt, self.attempts - 1, wait
        )
        return wait

    def wait_after_answer(self, attempt: int, response: httpx.Response, what: str) -> float | None:
        """How long to wait before retrying after ``response``; ``None``: it is the final answer."""
        if response.status_code not in RETRY_STATUSES or attempt >= self.attempts:
            return None
        asked = retry_after_seconds(response.headers.get("retry-after"))
        if asked is not None and asked > self.max_retry_after:
            return None  # the service asks for longer than we wait: report it now
        wait = max(self.delay(attempt), asked or 0.0)
        log.info("%s: HTTP %d; retry %d of %d in %.2f s", what, response.status_code, attempt, self.attempts - 1, wait)
        return wait


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now: a number of seconds or an HTTP date; ``None`` if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
