"""The stores the benchmark measures, each isolated (own file, schema or key prefix) and removed afterwards."""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .config import BenchConfig


@dataclass
class StoreTarget:
    """A store to measure: its name, its URL (isolated), and what removes it afterwards."""

    name: str
    url: str
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@contextlib.contextmanager
def store_targets(config: BenchConfig, tmp: Path) -> Iterator[list[StoreTarget]]:
    """The stores to measure, each isolated (own file, schema or key prefix) and removed afterwards."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    def with_query(url: str, **params: str) -> str:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
        return urlunsplit(parts._replace(query=urlencode(query)))

    name = f"chatlab_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    targets: list[StoreTarget] = []
    for store in config.stores:
        if store == "memory":
            targets.append(StoreTarget("memory", "memory://"))
        elif store == "sqlite":
            targets.append(StoreTarget("sqlite", f"sqlite:///{tmp / 'bench.db'}"))
        elif store == "postgresql" and config.postgres_url:
            target = StoreTarget("postgresql", with_query(config.postgres_url, schema=name))
            target.cleanup.append(functools.partial(_drop_postgres, config.postgres_url, name))
            targets.append(target)
        elif store == "redis" and config.redis_url:
            target = StoreTarget("redis", with_query(config.redis_url, prefix=name + ":"))
            target.cleanup.append(functools.partial(_drop_redis, config.redis_url, name + ":"))
            targets.append(target)
    try:
        yield targets
    finally:
        for target in targets:
            for clean in target.cleanup:
                with contextlib.suppress(Exception):
                    clean()


def _drop_postgres(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    from ..stores._urls import split_url
    from ..stores.postgres import CHATLAB_PARAMETERS

    with psycopg.connect(split_url(url, CHATLAB_PARAMETERS)[0], autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _drop_redis(url: str, prefix: str) -> None:
    import redis

    from ..stores._urls import split_url
    from ..stores.redis import CHATLAB_PARAMETERS

    client = redis.Redis.from_url(split_url(url, CHATLAB_PARAMETERS)[0], socket_timeout=5)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
    finally:
        client.close()
