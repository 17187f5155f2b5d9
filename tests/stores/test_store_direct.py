"""The store contract, called directly (no HTTP), on every store; and open_store's URL rules."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from store_helpers import batch, batches_present, check_batches

from chatlab.stores import ChatHistoryStore, ConversationSummary, InMemoryChatHistoryStore, StoreError, open_store
from chatlab.stores.base import ABSENT, Conversation, ConversationArray, ConversationRecord, VersionMismatch
from chatlab.stores.sqlite import SqliteChatHistoryStore, path_from_url
from tests.missing import require_module

# Bytes a JSON encoder may produce: escapes, non-ASCII (2-, 3- and 4-byte UTF-8), nulls, nesting.
ODD_MESSAGES = [
    b'{"role":"user","contents":[{"$type":"text","text":"hello"}]}',
    '{"role":"assistant","contents":[{"$type":"text","text":"日本語 é 😀 \\u0000 \\"q\\" \\\\"}]}'.encode(),
    b'{"role":"tool","contents":[{"$type":"functionResult","callId":"c1","result":{"a":[1,2.5,null,true],"b":{}}}],'
    b'"additionalProperties":null}',
    b'{"role":"user","contents":[{"$type":"text","text":"' + b"x" * 300_000 + b'"}]}',
]


PERSISTENT = ["sqlite", "postgres", "redis"]


def run(coro):
    return asyncio.run(coro)


async def _use(url: str, work):
    store = open_store(url)
    try:
        return await work(store)
    finally:
        await store.close()


def test_round_trip_is_byte_for_byte_and_in_order(store_url):
    async def work(store: ChatHistoryStore):
        assert await store.get("c1") == []
        await store.append("c1", ODD_MESSAGES[:2])
        await store.append("c1", [])  # nothing
        await store.append("c1", ODD_MESSAGES[2:])
        got = await store.get("c1")
        assert got == ODD_MESSAGES
        assert all(type(m) is bytes for m in got)
        assert await store.summaries() == [ConversationSummary("c1", 4)]

    run(_use(store_url, work))


def test_read_array_is_the_messages_joined_as_one_snapshot(store_url):
    async def work(store: ChatHistoryStore):
        assert await store.read_array("none") == ConversationArray(b"[]", 0, ABSENT)
        await store.replace("empty", [])  # exists, with no messages
        empty = await store.read_array("empty")
        assert (empty.array, empty.count, empty.version) == (b"[]", 0, (await store.read("empty")).version)
        for i in range(3):  # positions past 9: joined in position order, not text order
            await store.append("c", ODD_MESSAGES + batch(0, i, 2))
        whole, read = await store.read_array("c"), await store.read("c")
        assert whole == ConversationArray(b"[" + b",".join(read.messages) + b"]", len(read.messages), read.version)

    run(_use(store_url, work))


def test_replace_delete_and_summaries(store_url):
    async def work(store: ChatHistoryStore):
        await store.append("b", batch(0, 0, 3))
        await store.append("a", batch(0, 1, 2))
        await store.replace("c", [])  # an empty conversation exists
        await store.replace("b", batch(0, 2, 1))
        assert await store.get("b") == batch(0, 2, 1)
        assert await store.summaries() == [
            ConversationSummary("a", 2),
            ConversationSummary("b", 1),
            ConversationSummary("c", 0),
        ]
        await store.delete("a")
        await store.delete("never-existed")
        assert await store.get("a") == []
        assert await store.summaries() == [ConversationSummary("b", 1), ConversationSummary("c", 0)]
        await store.append("a", batch(0, 3, 2))  # a deleted key starts afresh
        assert await store.get("a") == batch(0, 3, 2)
        await store.replace("b", [])
        assert await store.get("b") == []
        assert ConversationSummary("b", 0) in await store.summaries()

    run(_use(store_url, work))


def test_summaries_order_keys_by_code_point_like_the_memory_store(store_url):
    keys = ["b", "B", "a-1", "a_1", "a", "Z9", "é", "z", "\ue000", "😀", "日本", "a.b", "~"]

    async def work(store: ChatHistoryStore):
        for n, key in enumerate(keys):
            await store.append(key, batch(0, n, n % 3 + 1))
        summaries = await store.summaries()
        assert [s.conversation_key for s in summaries] == sorted(keys)
        assert {s.conversation_key: s.message_count for s in summaries} == {k: n % 3 + 1 for n, k in enumerate(keys)}

    run(_use(store_url, work))


def test_concurrent_appends_stay_whole_contiguous_and_ordered(store_url):
    """Tasks of one event loop, and threads with loops of their own, append to one conversation."""
    store = open_store(store_url)
    expected: dict[tuple[int, int], int] = {}
    errors: list[BaseException] = []
    all_written = threading.Barrier(3)
    all_closed = threading.Barrier(3)

    async def writer(w: int, batches: int) -> None:
        for b in range(batches):
            size = (w + b) % 5 + 1
            await store.append("shared", batch(w, b, size))
            expected[(w, b)] = size

    async def thread_main(first: int) -> None:
        try:
            await asyncio.gather(*(writer(first + w, 8) for w in range(6)))
        except BaseException as exc:
            errors.append(exc)
        # Keep every loop running until all are done, then one thread closes the connections
        # of all three loops (close() reaches into the other running loops).
        await asyncio.to_thread(all_written.wait, 60)
        if first == 0:
            await store.close()
        await asyncio.to_thread(all_closed.wait, 60)

    threads = [threading.Thread(target=lambda f=f: run(thread_main(f))) for f in (0, 100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(expected) == 3 * 6 * 8

    async def check() -> None:
        messages = await store.get("shared")
        check_batches(messages, expected)
        assert await store.summaries() == [ConversationSummary("shared", len(messages))]
        await store.close()

    run(check())


def test_replace_and_delete_racing_appends_leave_whole_batches(store_url):
    async def work(store: ChatHistoryStore):
        async def appender(w: int) -> None:
            for b in range(10):
                await store.append("k", batch(w, b, 3))

        async def replacer() -> None:
            for b in range(5):
                await store.replace("k", batch(99, b, 2))
                await store.delete("k")

        await asyncio.gather(appender(1), appender(2), replacer())
        messages = await store.get("k")
        # What is left is whole batches, each once, each in order; the count agrees.
        present = batches_present(messages)
        check_batches(messages, present)
        summary = {s.conversation_key: s.message_count for s in await store.summaries()}
        assert summary.get("k", 0) == len(messages)

    run(_use(store_url, work))


def test_restore_writes_at_the_expected_version_and_refuses_a_stale_one(backend, store_url):
    """A migration's write: each record at its own version and times where the target is at ``expected``;
    a record whose ``expected`` is stale is refused, and in the SQL stores its whole batch with it."""
    one, two = ODD_MESSAGES[0], ODD_MESSAGES[2]

    async def work(store: ChatHistoryStore):
        current = (await store.append("r1", [one])).version
        await store.restore([ConversationRecord("r1", [two, one], "g.2", 10.0, 20.0, expected=current)])
        assert await store.read("r1") == Conversation([two, one], "g.2")
        assert [(s.created_at, s.updated_at) for s in await store.summaries()] == [(10.0, 20.0)]

        fresh = ConversationRecord("r0", [one], "h.1", 1.0, 2.0)  # absent: written
        stale = ConversationRecord("r1", [one], "h.1", 1.0, 2.0, expected=current)
        with pytest.raises(VersionMismatch) as refused:
            await store.restore([fresh, stale])
        assert refused.value.current == "g.2"
        assert await store.read("r1") == Conversation([two, one], "g.2")
        if backend in ("sqlite", "postgres"):  # one transaction: the whole batch refused
            assert await store.read("r0") == Conversation([], ABSENT)

    run(_use(store_url, work))


@pytest.mark.parametrize("backend", PERSISTENT)
def test_history_outlives_the_store_object(store_url):
    run(_use(store_url, lambda s: s.append("kept", ODD_MESSAGES)))
    assert run(_use(store_url, lambda s: s.get("kept"))) == ODD_MESSAGES


def test_store_states_its_schema_version_and_description(backend, store_url):
    store = open_store(store_url)
    assert store.description and store.description != ChatHistoryStore.description
    if backend != "memory":
        # 2: versions and idempotency records; 3: timestamps; Redis's 4: a conversation's keys in one hash slot,
        # Redis's 5: each bucket's index of plain keys, Redis's 6: participants; SQL's 4: titles and tags, SQL's 5:
        # participants
        assert store.schema_version == (6 if backend.startswith("redis") else 5)
    assert "password" not in store.description


def test_schema_version_is_recorded_in_the_database(backend, store_url):
    run(_use(store_url, lambda s: s.summaries()))  # first use creates the schema
    if backend == "sqlite":
        import sqlite3

        with sqlite3.connect(path_from_url(store_url)) as conn:
            row = conn.execute("SELECT value FROM chatlab_meta WHERE key = 'schema_version'").fetchone()
            assert row == ("5",)
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    elif backend == "postgres":
        import psycopg
        from psycopg import sql

        from chatlab.stores.postgres import CHATLAB_PARAMETERS, split_url

        conninfo, ours = split_url(store_url, CHATLAB_PARAMETERS)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute(
                sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(
                    sql.Identifier(ours["schema"], "chatlab_meta")
                )
            ).fetchone()
            assert row == ("5",)
    elif backend == "redis":
        import redis

        from chatlab.stores.redis import CHATLAB_PARAMETERS, split_url

        client_url, ours = split_url(store_url, CHATLAB_PARAMETERS)
        client = redis.Redis.from_url(client_url)
        try:
            assert client.hget(f"{ours['prefix']}meta", "schema_version") == b"6"
        finally:
            client.close()


@pytest.mark.parametrize("backend", PERSISTENT)
def test_a_newer_schema_is_refused(backend, store_url):
    run(_use(store_url, lambda s: s.summaries()))
    if backend == "sqlite":
        import sqlite3

        with sqlite3.connect(path_from_url(store_url)) as conn:
            conn.execute("UPDATE chatlab_meta SET value = '9' WHERE key = 'schema_version'")
    elif backend == "postgres":
        import psycopg
        from psycopg import sql

        from chatlab.stores.postgres import CHATLAB_PARAMETERS, split_url

        conninfo, ours = split_url(store_url, CHATLAB_PARAMETERS)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {} SET value = '9' WHERE key = 'schema_version'").format(
                    sql.Identifier(ours["schema"], "chatlab_meta")
                )
            )
    else:
        import redis

        from chatlab.stores.redis import CHATLAB_PARAMETERS, split_url

        client_url, ours = split_url(store_url, CHATLAB_PARAMETERS)
        with redis.Redis.from_url(client_url) as client:
            client.hset(f"{ours['prefix']}meta", "schema_version", "9")
    with pytest.raises(StoreError, match=r"schema version 9"):
        run(_use(store_url, lambda s: s.summaries()))


# -- unreachable databases ---------------------------------------------------------------


def test_unreachable_postgres_raises_store_error(closed_port):
    require_module("psycopg", "postgres")
    from chatlab.stores.postgres import PostgresChatHistoryStore

    store = PostgresChatHistoryStore(f"postgresql://postgres@127.0.0.1:{closed_port}/test", timeout=1.0)
    with pytest.raises(StoreError, match=f"127.0.0.1:{closed_port}/test is unreachable"):
        run(store.get("k"))
    with pytest.raises(StoreError):
        run(store.append("k", [b"{}"]))
    run(store.close())


def test_unreachable_redis_raises_store_error(closed_port):
    require_module("redis", "redis")
    from chatlab.stores.redis import RedisChatHistoryStore

    store = RedisChatHistoryStore(f"redis://127.0.0.1:{closed_port}/0", timeout=1.0)
    with pytest.raises(StoreError, match=f"127.0.0.1:{closed_port}/0 is unreachable"):
        run(store.append("k", [b"{}"]))
    with pytest.raises(StoreError):
        run(store.summaries())
    run(store.close())


def test_unwritable_sqlite_file_raises_store_error(tmp_path):
    store = SqliteChatHistoryStore(tmp_path / "no-such-dir" / "history.db")
    with pytest.raises(StoreError, match="unable to open database file"):
        run(store.summaries())


# -- open_store ------------------------------------------------------------------------


def test_open_store_selects_by_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store(None), InMemoryChatHistoryStore)
    assert isinstance(open_store("memory://"), InMemoryChatHistoryStore)
    assert open_store("sqlite:///history.db").path == tmp_path / "history.db"
    assert open_store("sqlite:///data/h.db").path == tmp_path / "data" / "h.db"
    assert open_store(f"sqlite:///{tmp_path}/abs.db").path == tmp_path / "abs.db"  # four slashes: absolute
    assert open_store("history.db").path == tmp_path / "history.db"
    assert open_store(str(tmp_path / "bare.sqlite")).path == tmp_path / "bare.sqlite"
    assert open_store("./x/y.db").path == tmp_path / "x" / "y.db"
    assert Path(path_from_url("sqlite:////var/lib/h.db")) == Path("/var/lib/h.db")


def test_open_store_selects_the_server_stores_lazily():
    require_module("psycopg", "postgres")
    require_module("redis", "redis")
    from chatlab.stores.postgres import PostgresChatHistoryStore
    from chatlab.stores.redis import RedisChatHistoryStore

    pg = open_store("postgresql://u:secret@db.invalid:6543/app?schema=chat&sslmode=disable")
    assert isinstance(pg, PostgresChatHistoryStore)
    assert pg.schema == "chat" and "schema" not in pg.conninfo and "sslmode=disable" in pg.conninfo
    assert "secret" not in pg.description and "db.invalid:6543/app" in pg.description
    assert isinstance(open_store("postgres://localhost/app"), PostgresChatHistoryStore)
    rd = open_store("redis://:secret@cache.invalid:6380/2?prefix=app:")
    assert isinstance(rd, RedisChatHistoryStore)
    assert rd.prefix == "app:" and "secret" not in rd.description and "cache.invalid:6380/2" in rd.description
    assert open_store("redis://localhost").prefix == "chatlab:"


@pytest.mark.parametrize(
    "url",
    ["mysql://localhost/db", "memory://elsewhere", "sqlite://host/x.db", "sqlite:///:memory:", ":memory:", "http://x"],
)
def test_open_store_refuses_other_urls(url):
    with pytest.raises(ValueError, match="store"):
        open_store(url)
