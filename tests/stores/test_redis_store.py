"""The Redis store on redis-py's public client: what its layout and its pipelining promise."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from chatlab.stores.base import ABSENT, StoreError
from chatlab.stores.redis import CHATLAB_PARAMETERS, UNVERSIONED, RedisChatHistoryStore, split_url
from chatlab.stores.redis.keys import Layout
from tests.stores.conftest import with_query


def test_a_connection_the_server_closed_is_opened_again_before_use(redis_url: str) -> None:
    """As after a Redis restart or its idle timeout: the next operation works, no StoreError."""
    import redis

    name = f"chatlab-test-{uuid.uuid4().hex[:8]}"
    url = with_query(redis_url, client_name=name)  # redis-py reads its own query parameters

    async def main() -> None:
        store = RedisChatHistoryStore(url, timeout=5.0)
        try:
            await store.append("k", [b'{"n":1}'])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                ours = [client["id"] for client in admin.client_list() if client.get("name") == name]
                assert ours
                for client_id in ours:
                    admin.client_kill_filter(_id=client_id)
            await asyncio.sleep(0.1)  # the end of the stream arrives
            assert (await store.read("k")).messages == [b'{"n":1}']
        finally:
            await store.close()

    asyncio.run(main())


def test_concurrent_operations_go_out_together_on_one_connection(redis_url: str) -> None:
    """Operations started together are pipelined: a pool of one connection serves them all."""

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0, max_connections=1)
        try:
            written = await asyncio.gather(*(store.append(f"k{i % 7}", [b'{"n":%d}' % i]) for i in range(200)))
            assert len({w.version for w in written}) == 200
            reads = await asyncio.gather(*(store.read(f"k{i}") for i in range(7)))
            assert sum(len(r.messages) for r in reads) == 200
        finally:
            await store.close()

    asyncio.run(main())


def test_a_script_redis_forgot_is_loaded_again(redis_url: str) -> None:
    """After ``SCRIPT FLUSH`` (as after a restart) the next call loads its script and runs once."""
    import redis

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            await store.append("k", [b"1"])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                admin.script_flush()
            await asyncio.gather(store.append("k", [b"2"]), store.append("j", [b"3"]), store.read("k"))
            assert await store.get("k") == [b"1", b"2"]
        finally:
            await store.close()

    asyncio.run(main())


def test_reads_tell_absent_unversioned_and_versioned_conversations_apart(redis_url: str) -> None:
    """The states the write scripts leave or find, as a read sees them (whole, as an array, in slices)."""
    import redis

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        layout = Layout(store.prefix, 1)
        try:
            written = await store.append("new", [b"1", b"2", b"3"])
            with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
                old, stray = layout.conversation("old"), layout.conversation("stray")
                admin.zadd(old.index, {"old": 0})  # upgraded from layout 1: indexed, messages, no version
                admin.rpush(old.messages, b"1", b"2")
                admin.rpush(stray.messages, b"1")  # not in the index: not a conversation
            for key, version, messages in [
                ("new", written.version, [b"1", b"2", b"3"]),
                ("old", UNVERSIONED, [b"1", b"2"]),
                ("stray", ABSENT, [b"1"]),
                ("none", ABSENT, []),
            ]:
                whole = await store.read(key)
                assert (whole.messages, whole.version) == (messages, version), key
                array = await store.read_array(key)
                assert (array.array, array.count, array.version) == (
                    b"[" + b",".join(messages) + b"]",
                    len(messages),
                    version,
                )
                part = await store.read_slice(key, 1, 1)
                assert (part.messages, part.count, part.version) == (messages[1:2], len(messages), version), key
                head = await store.read_slice(key, 0, 0)
                assert (head.messages, head.count, head.version) == ([], len(messages), version), key
                rest = await store.read_slice(key, 1)
                assert (rest.messages, rest.count, rest.version) == (messages[1:], len(messages), version), key
        finally:
            await store.close()

    asyncio.run(main())


def test_buckets_spread_conversations_and_listing_merges_them_in_key_order(redis_url: str) -> None:
    import redis

    url = with_query(redis_url, buckets="5")
    keys = [f"c{i}" for i in range(40)] + ["é", "z", "ä"]

    async def main() -> None:
        store = RedisChatHistoryStore(url, timeout=5.0)
        try:
            for key in keys:
                await store.append(key, [b"{}"])
            listed = [summary.conversation_key for summary in await store.summaries()]
            assert listed == sorted(keys)
            assert [s.conversation_key for s in await store.summaries("c1")] == sorted(k for k in keys if "c1" in k)
            store.retention, store.clock = 1.0, lambda: 1e12  # everything is due
            assert await store.sweep() == len(keys)
            assert await store.summaries() == []
        finally:
            await store.close()
        with pytest.raises(StoreError, match="buckets=5"):  # the count is the store's, recorded once
            await RedisChatHistoryStore(with_query(redis_url, buckets="3")).summaries()

    asyncio.run(main())
    with redis.Redis.from_url(split_url(redis_url, CHATLAB_PARAMETERS)[0]) as admin:
        prefix = split_url(url, CHATLAB_PARAMETERS)[1]["prefix"]
        assert admin.hget(f"{prefix}meta", "buckets") == b"5"


def test_bad_buckets_are_refused() -> None:
    with pytest.raises(ValueError, match="buckets"):
        RedisChatHistoryStore("redis://127.0.0.1:1/0?buckets=0")


def test_resp3_connections_work_alike(redis_url: str) -> None:
    """redis-py's own URL parameters pass through: ``?protocol=3`` speaks RESP3, and nothing changes."""
    from chatlab.stores.base import Idempotency, VersionMismatch

    async def main() -> None:
        store = RedisChatHistoryStore(with_query(redis_url, protocol="3"), timeout=5.0)
        try:
            first = await store.append("k", [b"1", b"2"], idempotency=Idempotency("i", "f"))
            assert (await store.append("k", [b"1", b"2"], idempotency=Idempotency("i", "f"))).replayed
            with pytest.raises(VersionMismatch):
                await store.append("k", [b"3"], if_match=["stale"])
            part = await store.read_slice("k", 1)
            assert (part.messages, part.count, part.version) == ([b"2"], 2, first.version)
            [summary] = await store.summaries()
            assert (summary.conversation_key, summary.message_count) == ("k", 2)
            await store.delete("k", if_match=[first.version])
            assert (await store.read("k")).version == ABSENT
        finally:
            await store.close()

    asyncio.run(main())
