"""Memory and storage per message, under the provider's real traffic: 4-message appends, each with an
``Idempotency-Key``, over many conversations.

* the **in-memory store**: the growth of the service process's resident memory (RSS) while the
  traffic goes through HTTP, the service started as ``chatlab serve`` starts it: what the
  machine pays. Beside it the Python heap the store holds for the same appends made in this
  process (``tracemalloc``): what the store's own objects cost, without the allocator's slack.
* the **database stores**: how much the database grows (file pages, relation sizes, the
  list's memory), the appends made through the store with the same idempotency records.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import tracemalloc
import uuid
from dataclasses import dataclass

import httpx

from .config import BenchConfig
from .servers import ServerProcess
from .targets import StoreTarget
from .workload import APPEND_KEYS, APPEND_MESSAGES, body, json_size, sample_messages

WARM_UP_APPENDS = 200
CLIENTS = 8
TTL = 24 * 3600.0


@dataclass
class StorageRow:
    """Bytes per stored message, next to the message's own JSON."""

    store: str
    per_message: float
    json_per_message: float
    what: str
    #: the in-memory store only: the Python heap per message (tracemalloc)
    heap_per_message: float | None = None

    @property
    def ratio(self) -> float:
        return self.per_message / self.json_per_message

    @property
    def heap_ratio(self) -> float | None:
        return None if self.heap_per_message is None else self.heap_per_message / self.json_per_message


def traffic(messages: int) -> list[bytes]:
    """The bodies of the provider's appends that store ``messages`` messages: 4 new messages each."""
    return [body(sample_messages(APPEND_MESSAGES, start=i)) for i in range(messages // APPEND_MESSAGES)]


def bench_storage(config: BenchConfig, stack: str, targets: list[StoreTarget]) -> list[StorageRow]:
    """Each store's bytes per message under the traffic; prints the table."""
    from .report import print_storage_header, print_storage_row

    bodies = traffic(config.memory_messages)
    n = len(bodies) * APPEND_MESSAGES
    size = json_size(bodies)
    print_storage_header(n, size / n, len(bodies))
    rows: list[StorageRow] = []
    for target in targets:
        if target.name == "memory":
            rss = _service_rss_growth(stack, bodies)
            heap = asyncio.run(_heap_of_store(bodies))
            row = StorageRow(
                "memory", rss / n, size / n, "growth of the service process's RSS (chatlab serve)", heap / n
            )
        else:
            used = asyncio.run(_database_growth(target, bodies))
            row = StorageRow(target.name, used / n, size / n, _DATABASE_MEASURE[target.name])
        rows.append(row)
        print_storage_row(row)
    return rows


def _service_rss_growth(stack: str, bodies: list[bytes]) -> int:
    with ServerProcess("service", stack) as service:
        asyncio.run(_send(service.url, traffic(WARM_UP_APPENDS * APPEND_MESSAGES), "warm-up"))
        before = service.rss()
        asyncio.run(_send(service.url, bodies, "bench-memory"))
        return service.rss() - before


async def _send(url: str, bodies: list[bytes], prefix: str) -> None:
    """The appends, from a few clients at once, each with an ``Idempotency-Key`` as the provider sends."""
    queue = list(enumerate(bodies))
    run = uuid.uuid4().hex[:8]

    async def client_loop(client: httpx.AsyncClient) -> None:
        while queue:
            i, raw = queue.pop()
            headers = {"content-type": "application/json", "idempotency-key": f'"{uuid.uuid4()}"'}
            response = await client.post(
                f"/chat-history/{prefix}-{run}-{i % APPEND_KEYS}", content=raw, headers=headers
            )
            response.raise_for_status()

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(CLIENTS)))


def _appends(bodies: list[bytes]) -> list[tuple[str, list[bytes], object]]:
    """What the service hands its store for each body: the key, the encoded messages, the idempotency record."""
    from ..service import schema
    from ..service.security.conditions import fingerprint
    from ..stores.base import Idempotency

    out: list[tuple[str, list[bytes], object]] = []
    for i, raw in enumerate(bodies):
        messages = schema.decode_messages_body(raw, max_messages=10_000)
        idempotency = Idempotency(str(uuid.uuid4()), fingerprint("append", messages), TTL)
        out.append((f"bench-storage-{i % APPEND_KEYS}", messages, idempotency))
    return out


async def _heap_of_store(bodies: list[bytes]) -> int:
    from ..stores import open_store
    from ..stores.base import Idempotency

    await open_store("memory://").append("warm-up", _appends(bodies[:1])[0][1])  # imports are not the store's cost
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = open_store("memory://")
        appends = _appends(bodies)  # traced: what the service decodes is what the store keeps
        for key, messages, idempotency in appends:
            assert isinstance(idempotency, Idempotency)
            await store.append(key, messages, idempotency=idempotency)
        del appends, key, messages, idempotency  # the store keeps its own references; the rest is not its cost
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del store
    return used


_DATABASE_MEASURE = {
    "sqlite": "growth of the database file (WAL checkpointed)",
    "postgresql": "growth of the tables and indexes (pg_total_relation_size)",
    "redis": "MEMORY USAGE of the conversations' lists and records",
}


async def _database_growth(target: StoreTarget, bodies: list[bytes]) -> int:
    from ..stores import open_store
    from ..stores.base import Idempotency

    store = open_store(target.url)
    try:
        await store.summaries()  # creates the schema, so it is not counted
        before = database_size(target)
        for key, messages, idempotency in _appends(bodies):
            assert isinstance(idempotency, Idempotency)
            await store.append(key, messages, idempotency=idempotency)
        after = database_size(target)
    finally:
        await store.close()
    return after - before


def database_size(target: StoreTarget) -> int:
    """What the database holds for the benchmark: file pages, relation sizes, or the list's memory."""
    if target.name == "sqlite":
        import sqlite3

        from ..stores._urls import path_from_url

        path = path_from_url(target.url)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        return pages * size
    if target.name == "postgresql":
        import psycopg

        from ..stores._urls import split_url
        from ..stores.postgres import CHATLAB_PARAMETERS

        conninfo, ours = split_url(target.url, CHATLAB_PARAMETERS)
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            total = 0
            for table in ("chatlab_messages", "chatlab_conversations", "chatlab_idempotency"):
                row = conn.execute(
                    "SELECT pg_total_relation_size(format('%%I.%%I', %s::text, %s::text)::regclass)",
                    (ours["schema"], table),
                ).fetchone()
                total += int(row[0]) if row else 0
            return total
    import redis

    from ..stores._urls import split_url
    from ..stores.redis import CHATLAB_PARAMETERS as REDIS_PARAMETERS

    client_url, ours = split_url(target.url, REDIS_PARAMETERS)
    client = redis.Redis.from_url(client_url, socket_timeout=5)
    try:
        total = 0
        keys = iter(client.scan_iter(match=f"{ours['prefix']}*", count=1000))
        while chunk := list(itertools.islice(keys, 1000)):  # one round trip per 1,000 keys, not per key
            pipe = client.pipeline(transaction=False)
            for key in chunk:
                pipe.memory_usage(key, samples=0)
            total += sum(int(size or 0) for size in pipe.execute())
        return total
    finally:
        client.close()
