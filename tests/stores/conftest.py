"""Fixtures for the store tests: one store URL per backend, with its test data isolated.

PostgreSQL and Redis tests use real servers named by environment variables:

    CHATLAB_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test
    CHATLAB_TEST_REDIS_URL=redis://127.0.0.1:6379/0
    CHATLAB_TEST_REDIS_CLUSTER_URL=redis+cluster://127.0.0.1:7000  (a Redis Cluster: .ci/run starts one)

Without them those tests skip (and say so); under CI (``CI=true``) they fail instead, so a
CI run can never pass by skipping them. Each test gets its own PostgreSQL schema or Redis key
prefix, dropped afterwards, so concurrent runs on one server don't collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from tests.missing import skip_or_fail

BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis-cluster"]
ENV = {
    "postgres": "CHATLAB_TEST_POSTGRES_URL",
    "redis": "CHATLAB_TEST_REDIS_URL",
    "redis-cluster": "CHATLAB_TEST_REDIS_CLUSTER_URL",
}
EXAMPLE = {
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
    "redis": "redis://127.0.0.1:6379/0",
    "redis-cluster": "redis+cluster://127.0.0.1:7000",
}


def server_url(backend: str) -> str:
    """The configured server URL of a backend, or skip (fail under CI) with how to enable it."""
    var = ENV[backend]
    url = os.environ.get(var)
    if not url:
        message = f"{backend} store tests need a server: set {var}={EXAMPLE[backend]} to run them"
        skip_or_fail(message)
    return url


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


def unique_name() -> str:
    return f"chatlab_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def drop_postgres_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def drop_redis_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        keys = list(client.scan_iter(match=prefix.replace("*", r"\*") + "*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
    finally:
        client.close()


def cluster_client(url: str) -> Any:
    """redis-py's (synchronous) cluster client for a ``redis+cluster://`` URL."""
    from redis.cluster import RedisCluster

    return RedisCluster.from_url(url.replace("+cluster", "", 1).split("?", 1)[0], socket_timeout=5)


def drop_redis_cluster_prefix(url: str, prefix: str) -> None:
    """Delete a prefix's keys on every primary of a cluster."""
    client = cluster_client(url)
    try:
        for node in client.get_primaries():
            keys = list(client.scan_iter(match=prefix + "*", count=1000, target_nodes=node))
            for key in keys:
                client.delete(key)
    finally:
        client.close()


@pytest.fixture
def postgres_server() -> str:
    """The configured PostgreSQL server URL itself, for tests that isolate their data on their own."""
    return server_url("postgres")


@pytest.fixture
def redis_server() -> str:
    """The configured Redis server URL itself, for tests that isolate their data on their own."""
    return server_url("redis")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL store URL whose tables live in a schema of this test only."""
    base = server_url("postgres")
    schema = unique_name()
    yield with_query(base, schema=schema)
    drop_postgres_schema(base, schema)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis store URL whose keys carry a prefix of this test only."""
    base = server_url("redis")
    prefix = unique_name() + ":"
    yield with_query(base, prefix=prefix)
    drop_redis_prefix(base, prefix)


@pytest.fixture
def redis_cluster_url() -> Iterator[str]:
    """A Redis Cluster store URL whose keys carry a prefix of this test only."""
    base = server_url("redis-cluster")
    prefix = unique_name() + ":"
    yield with_query(base, prefix=prefix)
    drop_redis_cluster_prefix(base, prefix)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend: str, request) -> str:
    """The URL of a fresh, isolated store of each backend."""
    if backend == "memory":
        return "memory://"
    return request.getfixturevalue(f"{backend.replace('-', '_')}_url")


@pytest.fixture
def service(store_url: str, settings) -> Iterator:
    """The service over a fresh store of each backend, given by URL (so the app owns and closes it);
    ``settings`` is tests/conftest.py's (a module overrides it to switch protections on)."""
    from chatlab.service import start_service

    server = start_service(store=store_url, settings=settings)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections (bound, never listening) for the test's duration."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
