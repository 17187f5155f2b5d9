"""A store written by an older layout is upgraded in place on first use: version 1 (no versions, no idempotency
records), version 2 (no timestamps), version 3 (no titles and tags) and version 4 (no participants)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from chatlab.stores import ChatHistoryStore, ConversationSummary, open_store
from chatlab.stores.base import ABSENT, Idempotency, VersionMismatch
from chatlab.stores.metadata import MetadataChange

OLD = [b'{"role":"user","contents":[]}', b'{"role":"assistant","contents":[]}']
NEW = b'{"role":"tool","contents":[]}'

V1_SQL = [
    "CREATE TABLE chatlab_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE chatlab_conversations (conversation_key TEXT PRIMARY KEY, message_count INTEGER NOT NULL)",
    "CREATE TABLE chatlab_messages (conversation_key TEXT NOT NULL, position INTEGER NOT NULL,"
    " body BLOB NOT NULL, PRIMARY KEY (conversation_key, position))",
    "INSERT INTO chatlab_meta VALUES ('schema_version', '1')",
    "INSERT INTO chatlab_conversations VALUES ('old', 2)",
]


async def _check_upgraded(store: ChatHistoryStore) -> None:
    try:
        old = await store.read("old")
        assert old.messages == OLD and old.version != ABSENT
        assert await store.summaries() == [ConversationSummary("old", 2)]
        [summary] = await store.summaries()  # the upgrade's time, as both
        assert summary.created_at is not None and summary.created_at == summary.updated_at
        with pytest.raises(VersionMismatch):
            await store.append("old", [NEW], if_match=["stale"])
        written = await store.append("old", [NEW], if_match=[old.version], idempotency=Idempotency("k", "fp"))
        assert written.version != old.version
        assert (await store.append("old", [NEW], idempotency=Idempotency("k", "fp"))).replayed
        assert await store.get("old") == [*OLD, NEW]
    finally:
        await store.close()


def test_sqlite_version_1_file(tmp_path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        for statement in V1_SQL:
            conn.execute(statement)
        conn.executemany("INSERT INTO chatlab_messages VALUES ('old', ?, ?)", list(enumerate(OLD)))
    asyncio.run(_check_upgraded(open_store(f"sqlite:///{path}")))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM chatlab_meta").fetchone() == ("5",)


# version 2: a version per conversation (the idempotency table is created if missing)
V2_SQL = [
    statement.replace("message_count INTEGER NOT NULL)", "message_count INTEGER NOT NULL, version TEXT)")
    .replace("'1')", "'2')")
    .replace("('old', 2)", "('old', 2, 'g2.2')")
    for statement in V1_SQL
] + [
    "CREATE TABLE chatlab_idempotency (conversation_key TEXT NOT NULL, idempotency_key TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL, version TEXT NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (conversation_key, idempotency_key))"
]


def test_sqlite_version_2_file_gains_timestamps(tmp_path) -> None:
    path = tmp_path / "v2.db"
    with sqlite3.connect(path) as conn:
        for statement in V2_SQL:
            conn.execute(statement)
        conn.executemany("INSERT INTO chatlab_messages VALUES ('old', ?, ?)", list(enumerate(OLD)))
    asyncio.run(_check_upgraded(open_store(f"sqlite:///{path}")))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM chatlab_meta").fetchone() == ("5",)
        indexes = [row[1] for row in conn.execute("PRAGMA index_list(chatlab_conversations)")]
        assert "chatlab_conversations_updated" in indexes


# version 3: timestamps, the last written indexed
V3_SQL = [
    statement.replace("version TEXT)", "version TEXT, created_at REAL, updated_at REAL)")
    .replace("'2')", "'3')")
    .replace("('old', 2, 'g2.2')", "('old', 2, 'g3.2', 1000.25, 1000.5)")
    for statement in V2_SQL
] + [
    "CREATE INDEX chatlab_conversations_updated ON chatlab_conversations (updated_at)",
    "INSERT INTO chatlab_conversations VALUES ('other', 0, 'g3.0', 1000.0, 1000.0)",
]


async def _check_metadata_added(store: ChatHistoryStore) -> None:
    """A version 3 database keeps its conversations, versions and times; they gain no title and no tags, and take
    both from then on."""
    try:
        assert (await store.read("old")).messages == OLD
        before = await store.summaries()
        assert [(s.conversation_key, s.message_count, s.version, s.created_at, s.updated_at) for s in before] == [
            ("old", 2, "g3.2", 1000.25, 1000.5),
            ("other", 0, "g3.0", 1000.0, 1000.0),
        ]
        assert all(s.title is None and dict(s.tags) == {} for s in before)
        changed = await store.set_metadata("old", MetadataChange("kept", True, {"k": "v"}))
        assert changed is not None and changed.version == "g3.2"  # metadata is not part of the version
        assert (changed.title, dict(changed.tags)) == ("kept", {"k": "v"})
        assert [s.conversation_key for s in await store.summaries(tags={"k": "v"})] == ["old"]
        assert [s.conversation_key for s in await store.summaries(after="old", limit=1)] == ["other"]
        assert (await store.append("old", [NEW], if_match=["g3.2"])).version == "g3.3"
    finally:
        await store.close()


def test_sqlite_version_3_file_gains_titles_and_tags(tmp_path) -> None:
    path = tmp_path / "v3.db"
    with sqlite3.connect(path) as conn:
        for statement in V3_SQL:
            conn.execute(statement)
        conn.executemany("INSERT INTO chatlab_messages VALUES ('old', ?, ?)", list(enumerate(OLD)))
    asyncio.run(_check_metadata_added(open_store(f"sqlite:///{path}")))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM chatlab_meta").fetchone() == ("5",)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")]
        assert columns[-3:] == ["title", "tags", "participants"]


def test_postgres_version_3_schema_gains_titles_and_tags_and_keys_in_code_point_order(postgres_url: str) -> None:
    """Besides the columns, the key column takes the "C" collation (code point order, as the other stores sort), so
    that its primary key's index serves a page; the tags get their GIN index."""
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for statement in V3_SQL:
            conn.execute(statement.replace("BLOB", "bytea").replace("INTEGER", "bigint").replace("REAL", "float8"))
        for position, body in enumerate(OLD):
            conn.execute("INSERT INTO chatlab_messages VALUES ('old', %s, %s)", (position, body))
    asyncio.run(_check_metadata_added(open_store(postgres_url)))
    with psycopg.connect(base, autocommit=True) as conn:
        assert conn.execute(f'SELECT value FROM "{schema}".chatlab_meta').fetchone() == ("5",)
        collation = conn.execute(
            "SELECT c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation"
            " WHERE a.attrelid = %s::regclass AND a.attname = 'conversation_key'",
            (f'"{schema}".chatlab_conversations',),
        ).fetchone()
        assert collation == ("C",)
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,))}
        assert {"chatlab_conversations_tags", "chatlab_conversations_updated"} <= indexes


@pytest.mark.parametrize("old", [V1_SQL, V2_SQL], ids=["version 1", "version 2"])
def test_postgres_older_schema(postgres_url: str, old: list[str]) -> None:
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for statement in old:
            conn.execute(statement.replace("BLOB", "bytea").replace("INTEGER", "bigint"))
        for position, body in enumerate(OLD):
            conn.execute("INSERT INTO chatlab_messages VALUES ('old', %s, %s)", (position, body))
    asyncio.run(_check_upgraded(open_store(postgres_url)))
    with psycopg.connect(base, autocommit=True) as conn:
        assert conn.execute(f'SELECT value FROM "{schema}".chatlab_meta').fetchone() == ("5",)


def test_redis_version_1_layout(redis_url: str) -> None:
    from urllib.parse import parse_qs, urlsplit

    import redis

    prefix = parse_qs(urlsplit(redis_url).query)["prefix"][0]
    client = redis.Redis.from_url(redis_url.split("?", 1)[0])
    try:
        client.hset(f"{prefix}meta", "schema_version", "1")
        client.zadd(f"{prefix}conversations", {"old": 0})
        client.rpush(f"{prefix}messages:old", *OLD)
        asyncio.run(_check_upgraded(open_store(redis_url)))
        assert client.hget(f"{prefix}meta", "schema_version") == b"6"
        assert not client.exists(f"{prefix}conversations", f"{prefix}messages:old")  # moved into its hash slot
    finally:
        client.close()


def test_redis_version_3_layout_keeps_versions_times_expiries_and_idempotency_records(redis_url: str) -> None:
    """Layout 3 (keys without hash tags) moves into the bucketed layout: everything it held still reads."""
    from urllib.parse import parse_qs, urlsplit

    import redis

    prefix = parse_qs(urlsplit(redis_url).query)["prefix"][0]
    client = redis.Redis.from_url(redis_url.split("?", 1)[0])
    expire_at = int((time.time() + 3600) * 1000)
    try:
        client.hset(f"{prefix}meta", "schema_version", "3")
        for key in ("old", "gone"):
            client.zadd(f"{prefix}conversations", {key: 0})
            client.zadd(f"{prefix}updated", {key: 1000.5})
            client.rpush(f"{prefix}messages:{key}", *OLD)
            client.set(f"{prefix}version:{key}", "g3.2")
            client.set(f"{prefix}times:{key}", "1000.25 1000.5")
        client.pexpireat(f"{prefix}messages:old", expire_at)
        client.set(f"{prefix}idempotency:3:old:retry:1", "fp g3.2", px=3_600_000)

        async def upgraded() -> None:
            store = open_store(redis_url)
            try:
                old = await store.read("old")
                assert (old.messages, old.version) == (OLD, "g3.2")
            finally:
                await store.close()

        asyncio.run(upgraded())
        [moved] = [key for key in client.scan_iter(match=f"{prefix}*messages:old") if key.endswith(b"messages:old")]
        assert client.pexpiretime(moved) == expire_at  # a rename keeps the expiry

        async def check() -> None:
            store = open_store(redis_url)
            try:
                summary = ConversationSummary("old", 2, "g3.2", 1000.25, 1000.5)
                assert await store.summaries() == [ConversationSummary("gone", 2, "g3.2", 1000.25, 1000.5), summary]
                await store.delete("gone")
                replay = await store.append("old", [NEW], idempotency=Idempotency("retry:1", "fp"))
                assert replay.replayed and replay.version == "g3.2"
                assert (await store.append("old", [NEW], if_match=["g3.2"])).version == "g3.3"
                assert await store.get("old") == [*OLD, NEW]
                [listed] = await store.summaries()
                assert (listed.title, dict(listed.tags)) == (None, {})  # a layout from before metadata: none
                changed = await store.set_metadata("old", MetadataChange("t", True, {"from": "3"}))
                assert changed is not None and (changed.version, changed.title) == ("g3.3", "t")
                assert [s.conversation_key for s in await store.summaries(tags={"from": "3"})] == ["old"]
            finally:
                await store.close()

        asyncio.run(check())
        assert client.hget(f"{prefix}meta", "schema_version") == b"6"
        assert not client.exists(f"{prefix}conversations", f"{prefix}updated", f"{prefix}messages:old")
        assert not client.exists(f"{prefix}idempotency:3:old:retry:1")
    finally:
        client.close()


@pytest.mark.parametrize("stored", ["g.2", "a.b.2", "tok", "abc.12x", "x.", ".5"])
def test_postgres_append_versions_as_appended_version_does(postgres_url: str, stored: str) -> None:
    """The append computes the new version in SQL: it must be what ``appended_version`` gives in Python,
    for any version a conversation may hold (older layouts wrote bare tokens)."""
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    from chatlab.stores.base import appended_version

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    store = open_store(postgres_url)

    async def work() -> str:
        try:
            await store.append("c", OLD)
            with psycopg.connect(postgres_url.split("?", 1)[0], autocommit=True) as conn:
                conn.execute(f'UPDATE "{schema}".chatlab_conversations SET version = %s', (stored,))
            return (await store.append("c", [NEW], if_match=[stored])).version
        finally:
            await store.close()

    assert asyncio.run(work()) == appended_version(stored, 3)


def test_postgres_schema_made_once_by_many_first_calls(postgres_url: str) -> None:
    """30 tasks start at once on a fresh schema, from two stores (as two processes would), each appending five times:
    the late starters wait for the one that makes the tables and make none again (DDL on tables the early ones
    already append to deadlocked: 26 of 30 failed with 'deadlock detected' before the fix, in 4 runs of 4)."""

    async def main() -> None:
        stores = [open_store(postgres_url), open_store(postgres_url)]
        try:

            async def appends(i: int) -> None:
                for _ in range(5):  # the early ones append while the late ones still set up
                    await stores[i % 2].append(f"k{i % 6}", [NEW])

            results = await asyncio.gather(*(appends(i) for i in range(30)), return_exceptions=True)
            assert [r for r in results if isinstance(r, BaseException)] == []
            assert sum(s.message_count for s in await stores[0].summaries()) == 150
        finally:
            for store in stores:
                await store.close()

    asyncio.run(main())


OLDER_FUNCTION = "chatlab_append_1"
"""The single append's function that an older chatlab created beside the batch one (left as it is)."""


@pytest.mark.parametrize("dropped", ["both", "grouped"])
def test_postgres_version_3_schema_gains_the_append_function(postgres_url: str, dropped: str) -> None:
    """A version 3 schema that an older chatlab made (tables only, or tables and the single append's function)
    gets the missing append function on first use, once, and keeps its tables, data and other functions: the
    function is created beside them, nothing is altered; grouped appends then run through it."""
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    from chatlab.stores.postgres.appends import FUNCTION

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]

    async def write_then_drop_the_function() -> str:
        store = open_store(postgres_url)
        try:
            return (await store.append("old", OLD)).version
        finally:
            await store.close()

    version = asyncio.run(write_then_drop_the_function())

    def functions() -> list[str]:
        with psycopg.connect(base, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s",
                (schema,),
            ).fetchall()
            return sorted(row[0] for row in rows)

    assert functions() == [FUNCTION]
    with psycopg.connect(base, autocommit=True) as conn:  # the schema as an older chatlab left it
        conn.execute(f'DROP FUNCTION "{schema}"."{FUNCTION}"')
        if dropped == "grouped":  # it had the single append's function only (its body does not matter here)
            conn.execute(f'CREATE FUNCTION "{schema}"."{OLDER_FUNCTION}"() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$')
    expected = [FUNCTION] if dropped == "both" else sorted([OLDER_FUNCTION, FUNCTION])

    async def use() -> None:
        store = open_store(postgres_url)
        try:
            assert (await store.read("old")).version == version
            written = await store.append("old", [NEW], if_match=[version], idempotency=Idempotency("k", "fp"))
            assert (await store.append("old", [NEW], idempotency=Idempotency("k", "fp"))).replayed
            assert (await store.read("old")).messages == [*OLD, NEW] and written.version != version
            await asyncio.gather(*(store.append(f"new{i % 3}", [NEW]) for i in range(12)))  # grouped
            assert [len((await store.read(f"new{i}")).messages) for i in range(3)] == [4, 4, 4]
        finally:
            await store.close()

    asyncio.run(use())
    assert functions() == expected


# SQL version 4, Redis layouts 4 and 5: no participants. A store written now, its participants taken away.
SIGNED = [
    b'{"role":"user","contents":[]}',
    b'{"role":"assistant","contents":[],"authorName":"Planner"}',
    b'{"role":"assistant","contents":[],"authorName":"Worker"}',
    b'{"role":"assistant","contents":[],"authorName":"Planner"}',
]
WORKER = b'{"role":"assistant","contents":[],"authorName":"Worker"}'


async def _write_current(url: str) -> None:
    store = open_store(url)
    try:
        await store.append("team", SIGNED)
        await store.append("plain", OLD)
    finally:
        await store.close()


async def _check_participants_counted(url: str) -> None:
    """The upgrade counted each conversation's authors from its messages; appends add to those counts."""
    store = open_store(url)
    try:
        summaries = {s.conversation_key: dict(s.participants) for s in await store.summaries()}
        assert summaries == {"plain": {}, "team": {"Planner": 2, "Worker": 1}}
        await store.append("team", [WORKER, WORKER])
        [team] = await store.summaries("team")
        assert dict(team.participants) == {"Planner": 2, "Worker": 3}
    finally:
        await store.close()


def test_sqlite_version_4_file_gains_participants(tmp_path) -> None:
    path = tmp_path / "v4.db"
    asyncio.run(_write_current(f"sqlite:///{path}"))
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE chatlab_conversations DROP COLUMN participants")
        conn.execute("UPDATE chatlab_meta SET value = '4' WHERE key = 'schema_version'")
    asyncio.run(_check_participants_counted(f"sqlite:///{path}"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM chatlab_meta").fetchone() == ("5",)


def test_postgres_version_4_schema_gains_participants(postgres_url: str) -> None:
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]
    asyncio.run(_write_current(postgres_url))
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".chatlab_conversations DROP COLUMN participants')
        conn.execute(f"""UPDATE "{schema}".chatlab_meta SET value = '4' WHERE key = 'schema_version'""")
    asyncio.run(_check_participants_counted(postgres_url))
    with psycopg.connect(base, autocommit=True) as conn:
        assert conn.execute(f'SELECT value FROM "{schema}".chatlab_meta').fetchone() == ("5",)


@pytest.mark.parametrize("cluster", [False, True], ids=["single server", "cluster"])
@pytest.mark.parametrize("older", ["4", "5"])
def test_redis_layouts_4_and_5_gain_participants(older: str, cluster: bool, request: pytest.FixtureRequest) -> None:
    """Layouts 4 and 5 had no participants hashes: the upgrade counts them, on a cluster too (each in its hash
    slot)."""
    from urllib.parse import parse_qs, urlsplit

    import redis

    from chatlab.stores.redis.keys import Layout
    from tests.stores.conftest import cluster_client

    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    prefix = parse_qs(urlsplit(url).query)["prefix"][0]
    client = cluster_client(url) if cluster else redis.Redis.from_url(url.split("?", 1)[0])
    try:
        asyncio.run(_write_current(url))
        layout = Layout(prefix, int(client.hget(f"{prefix}meta", "buckets")))
        for key in ("team", "plain"):
            client.delete(layout.conversation(key).participants)
        client.hset(f"{prefix}meta", "schema_version", older)
        asyncio.run(_check_participants_counted(url))
        assert client.hget(f"{prefix}meta", "schema_version") == b"6"
    finally:
        client.close()
