"""The Redis store's clients (redis-py's, one per event loop) and the pipelining of its script calls.

redis-py's cluster pipelines refuse scripts, so on a cluster each call is its own command, at most
``max_connections`` in flight (a node's pool refuses more rather than queue them). A script Redis has not cached
(after a restart or a failover) is loaded and the call run again: it had not run. Nothing else is retried: a script
run again after its answer was lost would append twice.

Each call Redis is sent (on a single server: each pipeline) ends within the store timeout, the wait for a pooled
connection included: one ``asyncio.timeout`` around it, which redis-py documents as safe (a connection cut off
mid-reply is closed, never reused). On a single server that is the only bound of a call's socket reads, so a
pipeline of many calls pays for one timer, not one per reply. A cluster's client keeps redis-py's socket timeout as
well: it refreshes its map of the nodes after its own timeout errors, not after a cancelled call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from .. import _urls as urls
from .scripts import Script

#: URL schemes of a cluster, as redis-py's own (``redis://``, ``rediss://``) with ``+cluster``.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

_Call = tuple[Script, Sequence[Any], Sequence[Any], asyncio.Future[Any]]


def redacted(url: str) -> str:
    """host:port/database (or the socket's path) of a Redis URL, without user or password, for messages."""
    return urls.redacted(url, default_port=6379, default_database="0")


async def open_calls(url: str, cluster: bool, timeout: float, max_connections: int) -> Calls:
    """redis-py's client for ``url``: no retries; connecting bounded by ``timeout``, and each call by :class:`Calls`."""
    import redis.asyncio
    from redis.asyncio.cluster import RedisCluster
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    no_retries = Retry(NoBackoff(), 0)
    options: dict[str, Any] = {"socket_connect_timeout": timeout, "retry": no_retries}
    with contextlib.suppress(ImportError):  # redis-py 7+: with these on, a pool hands out connections the server closed
        from redis.maint_notifications import MaintNotificationsConfig

        options["maint_notifications_config"] = MaintNotificationsConfig(enabled=False)
    if not cluster:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=timeout, **options
        )
        client = redis.asyncio.Redis(connection_pool=pool)
        return Calls(client, cluster=False, limit=max_connections, timeout=timeout)
    scheme, rest = url.split("://", 1)
    plain = f"{CLUSTER_SCHEMES.get(scheme, scheme)}://{rest}"
    cluster_client = RedisCluster.from_url(plain, max_connections=max_connections, socket_timeout=timeout, **options)
    async with asyncio.timeout(timeout):
        await cluster_client.initialize()  # the slot map, once for the concurrent first calls
    return Calls(cluster_client, cluster=True, limit=max_connections, timeout=timeout)


class Calls:
    """One event loop's client; on a single server the script calls of one turn of the loop go out as one pipeline,
    each call (or pipeline) bounded by ``timeout`` seconds."""

    def __init__(self, client: Any, *, cluster: bool, limit: int, timeout: float) -> None:
        from redis.exceptions import NoScriptError

        self.client = client
        self._timeout = timeout
        self._cluster = cluster
        self._turns = asyncio.Semaphore(limit)
        self._no_script = NoScriptError
        self._loop = asyncio.get_running_loop()
        self._waiting: list[_Call] = []
        self._running: set[asyncio.Task[None]] = set()

    async def script(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """The script's reply (an error reply raised as redis-py raises it); ``TimeoutError`` past the timeout."""
        if self._cluster:
            async with asyncio.timeout(self._timeout), self._turns:
                try:
                    return await self.client.evalsha(script.sha, len(keys), *keys, *args)
                except self._no_script:
                    await self.client.script_load(script.text)
                    return await self.client.evalsha(script.sha, len(keys), *keys, *args)
        future = self._loop.create_future()
        if not self._waiting:
            self._loop.call_soon(self._send)
        self._waiting.append((script, keys, args, future))
        return await future

    def _send(self) -> None:
        calls, self._waiting = self._waiting, []
        task = self._loop.create_task(self._run(calls))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, calls: list[_Call]) -> None:
        """Send ``calls`` as one pipeline and settle each call's future with its reply."""
        try:
            async with asyncio.timeout(self._timeout):
                replies = await self._replies(calls)
        except Exception as exc:  # every call of the pipeline failed with it
            replies = [exc] * len(calls)
        except BaseException:  # cancelled (the store closed)
            for *_, future in calls:
                future.cancel()
            raise
        for (*_, future), reply in zip(calls, replies, strict=True):
            if future.done():  # given up (its deadline)
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _replies(self, calls: list[_Call]) -> list[Any]:
        """The replies of ``calls`` sent as one pipeline; the calls of scripts Redis had not cached are run again."""
        replies = await self._pipeline(calls)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, self._no_script)]
        if missing:  # not run: load the scripts and run those calls again
            for text in {calls[i][0].text for i in missing}:
                await self.client.script_load(text)
            for i, reply in zip(missing, await self._pipeline([calls[i] for i in missing]), strict=True):
                replies[i] = reply
        return replies

    async def _pipeline(self, calls: Sequence[_Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args, _ in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))

    async def close(self) -> None:
        """Cancel the pipelines being sent and close the client."""
        for task in list(self._running):
            task.cancel()
        await self.client.aclose()
