"""The stores the benchmark measures, each isolated (own file, schema or key prefix) and removed afterwards.

Every store has two places: one for chatlab's service, one for the baseline app, so neither reads
what the other wrote. The names carry the benchmark's process id (``chatlab_bench_<pid>_...``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .config import BenchConfig


@dataclass
class StoreTarget:
    """A store to measure: its name, the service's URL, the baseline's URL, and what removes both afterwards."""

    name: str
    url: str
    baseline_url: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to its query."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def isolation_name() -> str:
    """The prefix of this run's schemas and keys."""
    return f"chatlab_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def store_targets(config: BenchConfig, tmp: Path) -> Iterator[list[StoreTarget]]:
    """The stores to measure (PostgreSQL and Redis when their URLs are given), removed afterwards."""
    name = isolation_name()
    targets: list[StoreTarget] = []
    for store in config.stores:
        if store == "memory":
            targets.append(StoreTarget("memory", "memory://", "memory://"))
        elif store == "sqlite":
            targets.append(StoreTarget("sqlite", f"sqlite:///{tmp / 'chatlab.db'}", f"sqlite:///{tmp / 'baseline.db'}"))
        elif store == "postgresql" and config.postgres_url:
            ours = name
            theirs = name + "_baseline"
            target = StoreTarget(
                "postgresql",
                with_query(config.postgres_url, schema=ours),
                with_query(config.postgres_url, schema=theirs),
            )
            target.cleanup += [functools.partial(drop_postgres, config.postgres_url, s) for s in (ours, theirs)]
            targets.append(target)
        elif store == "redis" and config.redis_url:
            target = StoreTarget(
                "redis",
                with_query(config.redis_url, prefix=name + ":"),
                with_query(config.redis_url, prefix=name + "_baseline:"),
            )
            target.cleanup.append(functools.partial(drop_redis, config.redis_url, name))
            targets.append(target)
    try:
        yield targets
    finally:
        for target in targets:
            for clean in target.cleanup:
                with contextlib.suppress(Exception):
                    clean()


def drop_postgres(url: str, schema: str) -> None:
    """Drop a schema of the run (``url``: the server as given, without chatlab's parameters)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def drop_redis(url: str, prefix: str) -> None:
    """Delete the run's keys (every key that starts with ``prefix``)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
    finally:
        client.close()
