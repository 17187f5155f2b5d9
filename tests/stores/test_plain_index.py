"""The plain keys' index (``summaries(plain=True)``, a keyless service's listing) in the stores that persist: made
for data written before it (a SQLite file, a PostgreSQL schema, a Redis layout 4 store, on one server and on a
cluster), read by the page's query, and, for a PostgreSQL role that may not create it, a slower listing that still
answers right and says why in the log."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from chatlab.stores import ChatHistoryStore, open_store
from chatlab.stores.base import ConversationRecord, new_version
from chatlab.stores.sqlite import path_from_url
from chatlab.vocabulary import is_plain
from tests.stores.conftest import cluster_client
from tests.stores.store_helpers import table_user_role

PLAIN = ["a", "b", "c-1", "z"]
NAMESPACED = [f"{owner}/c{n:03d}" for owner in ("a", "alice", "b", "bob") for n in range(40)]
TAGS = {"team": "blue"}


def _records(keys: list[str]) -> list[ConversationRecord]:
    return [
        ConversationRecord(key, [b"{}"], new_version(1), 1.7e9, 1.7e9, tags=TAGS if n % 2 else {})
        for n, key in enumerate(keys)
    ]


async def _with_store(url: str, work):  # type: ignore[no-untyped-def]
    store = open_store(url)
    try:
        return await work(store)
    finally:
        await store.close()


async def _fill(store: ChatHistoryStore) -> None:
    await store.restore(_records(PLAIN + NAMESPACED))


async def _listed(store: ChatHistoryStore) -> tuple[list[str], list[str], list[str]]:
    """The plain listing whole, a page after ``a``, and the plain ones tagged blue."""
    whole = [s.conversation_key for s in await store.summaries(plain=True)]
    page = [s.conversation_key for s in await store.summaries(after="a", limit=2, plain=True)]
    blue = [s.conversation_key for s in await store.summaries(tags=TAGS, plain=True)]
    return whole, page, blue


EXPECTED = (PLAIN, ["b", "c-1"], [key for n, key in enumerate(PLAIN) if n % 2])


def test_a_sqlite_file_written_before_the_index_gets_it_and_its_pages_read_it(sqlite_url: str) -> None:
    from chatlab.stores.sqlite import statements

    asyncio.run(_with_store(sqlite_url, _fill))
    path = path_from_url(sqlite_url)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX chatlab_conversations_plain")  # as a file written by an older chatlab
    assert asyncio.run(_with_store(sqlite_url, _listed)) == EXPECTED
    with sqlite3.connect(path) as conn:
        made = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'chatlab_conversations_plain'").fetchone()
        assert made is not None and "WHERE instr(conversation_key, '/') = 0" in made[0]
        for below in (False, True):
            plan = conn.execute(f"EXPLAIN QUERY PLAN {statements.summaries(below, True)}", ("a", "a", "b", None, 2))
            assert "USING INDEX chatlab_conversations_plain" in str(plan.fetchall())


def _schema(postgres_url: str) -> str:
    return parse_qs(urlsplit(postgres_url).query)["schema"][0]


def test_a_postgres_schema_made_before_the_index_gets_it_and_its_pages_read_it(postgres_url: str) -> None:
    """The index is made on the schema's next use, and every plan of a plain page reads it, custom or generic (as a
    prepared statement may run), once there are many namespaced conversations (20,000 here)."""
    import psycopg

    from chatlab.stores.postgres.statements import Statements

    schema = _schema(postgres_url)
    base = postgres_url.split("?", 1)[0]
    asyncio.run(_with_store(postgres_url, _fill))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{schema}".chatlab_conversations_plain')  # as a schema of an older chatlab
        conn.execute(
            f'INSERT INTO "{schema}".chatlab_conversations (conversation_key, message_count, version)'
            " SELECT 'n' || (i % 50) || '/c' || i, 1, 'g.1' FROM generate_series(1, 20000) AS i"
        )
    assert asyncio.run(_with_store(postgres_url, _listed)) == EXPECTED
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'ANALYZE "{schema}".chatlab_conversations')
        for (below, tagged, plain), statement in Statements(schema).pages.items():
            if not plain or tagged:
                continue
            types = "text, text, int8, text" if below else "text, text, int8"
            values = "'a', 'a', 2, 'b'" if below else "'a', 'a', 2"
            conn.execute(f"PREPARE page ({types}) AS {statement}")
            for mode in ("force_custom_plan", "force_generic_plan"):
                conn.execute(f"SET plan_cache_mode = {mode}")
                plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN EXECUTE page ({values})"))
                assert "chatlab_conversations_plain" in plan, (mode, plan)
            conn.execute("DEALLOCATE page")


def test_a_postgres_role_that_may_not_make_the_index_lists_right_and_is_told_why(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    schema = _schema(postgres_url)
    asyncio.run(_with_store(postgres_url, _fill))
    with table_user_role(postgres_url, schema) as (admin, url):
        admin.execute(f'DROP INDEX "{schema}".chatlab_conversations_plain')
        with caplog.at_level(logging.WARNING, logger="chatlab.stores.postgres.schema"):
            assert asyncio.run(_with_store(url, _listed)) == EXPECTED
        warnings = [r.getMessage() for r in caplog.records if "chatlab_conversations_plain" in r.getMessage()]
        assert len(warnings) == 1 and "may not create it" in warnings[0]
        missing = admin.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = 'chatlab_conversations_plain'",
            (schema,),
        ).fetchone()
        assert missing is None


@pytest.mark.parametrize("backend", ["redis", "redis-cluster"])
def test_a_redis_layout_4_store_gets_its_plain_indexes(store_url: str, backend: str) -> None:
    """Layout 4 had no plain index: opened by this chatlab, each bucket's is filled from its index of every key,
    the layout becomes the newest, and the plain listing holds every plain key (on one server and on a cluster)."""
    import redis

    from chatlab.stores.redis import CHATLAB_PARAMETERS, split_url

    client_url, ours = split_url(store_url, CHATLAB_PARAMETERS)
    prefix = ours["prefix"]
    asyncio.run(_with_store(store_url, _fill))
    client: Any = cluster_client(store_url) if backend == "redis-cluster" else redis.Redis.from_url(client_url)
    try:
        buckets = int(client.hget(f"{prefix}meta", "buckets"))
        for bucket in range(buckets):  # as a layout 4 store: no plain index
            client.delete(f"{prefix}{{{bucket}}}:plain")
        client.hset(f"{prefix}meta", "schema_version", "4")
        assert asyncio.run(_with_store(store_url, _listed)) == EXPECTED
        assert client.hget(f"{prefix}meta", "schema_version") == b"6"
        for bucket in range(buckets):
            every = client.zrange(f"{prefix}{{{bucket}}}:conversations", 0, -1)
            plain = client.zrange(f"{prefix}{{{bucket}}}:plain", 0, -1)
            assert plain == [key for key in every if is_plain(key.decode())]
    finally:
        client.close()
