"""The Redis store's clients: one per event loop, and a deadline on every operation.

Every operation ends within the store's ``timeout``, connecting included, even when Redis or the network
stops answering; the connection it waited on is then closed, never reused. redis-py's own retries are off:
a retried script that had run before its answer was lost would append twice (chatlab's client retries with
an ``Idempotency-Key`` instead). redis-py and socket errors become :class:`~chatlab.stores.base.StoreError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from .base import StoreError

if TYPE_CHECKING:
    from redis.asyncio import Redis

R = TypeVar("R")

log = logging.getLogger(__name__)


def redacted(url: str) -> str:
    """host:port/database (or the socket's path) of a URL, without user or password, for messages."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    database = parts.path.lstrip("/") or "0"
    return f"{host}:{port}/{database}"


class RedisConnections:
    """Mixed into :class:`~chatlab.stores.redis.RedisChatHistoryStore`: opens its clients, guards each operation."""

    client_url: str
    timeout: float
    max_connections: int
    where: str
    _client: Callable[[], Awaitable[Redis]]

    async def _open_client(self) -> Redis:
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        return redis.asyncio.Redis.from_url(
            self.client_url,
            socket_timeout=self.timeout,
            socket_connect_timeout=self.timeout,
            max_connections=self.max_connections,
            decode_responses=False,
            retry=Retry(NoBackoff(), 0),  # see the module's docstring
        )

    @staticmethod
    async def _close_client(client: Redis) -> None:
        await client.aclose()

    async def _guard(self, work: Callable[[Redis], Awaitable[R]]) -> R:
        """Await ``work(client)``; redis-py and socket errors become StoreError."""
        import redis.exceptions

        try:
            async with asyncio.timeout(self.timeout):  # a cancelled read closes its connection (redis-py)
                client = await self._client()
                return await work(client)
        except StoreError:
            raise
        except TimeoutError:
            message = f"Redis at {self.where} did not answer within {self.timeout:g} s (the store timeout)"
        except redis.exceptions.TimeoutError as exc:
            message = f"Redis at {self.where} timed out: {exc}"
        except redis.exceptions.ConnectionError as exc:
            message = f"Redis at {self.where} is unreachable: {exc}"
        except (redis.exceptions.RedisError, OSError) as exc:
            message = f"Redis at {self.where} failed: {exc}"
        log.warning("%s", message)
        raise StoreError(message)
