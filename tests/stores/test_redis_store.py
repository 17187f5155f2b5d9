"""The Redis store on redis-py's public client: what its layout and its pipelining promise."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from chatlab.stores.base import ABSENT, StoreError
from chatlab.stores.metadata import MetadataChange
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
                admin.zadd(old.conversations, {"old": 0})  # upgraded from layout 1: indexed, messages, no version
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
                changed = await store.set_metadata(key, MetadataChange(tags={"t": key}))
                if version == ABSENT:
                    assert changed is None, key
                else:
                    assert changed is not None and (changed.version, dict(changed.tags)) == (version, {"t": key})
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
            changed = await store.set_metadata("k", MetadataChange("t", True, {"a": "1"}))
            assert changed is not None and (changed.title, dict(changed.tags)) == ("t", {"a": "1"})
            [summary] = await store.summaries(tags={"a": "1"}, limit=5)
            assert (summary.title, dict(summary.tags)) == ("t", {"a": "1"})
            await store.delete("k", if_match=[first.version])
            assert (await store.read("k")).version == ABSENT
        finally:
            await store.close()

    asyncio.run(main())


def test_metadata_and_its_tag_index_entries_go_with_the_conversation(redis_url: str) -> None:
    """Delete and the sweep drop a conversation's metadata hash and its tag index entries, leaving no key behind;
    a conversation whose keys Redis expired before a sweep is absent, and written again starts with none."""
    import redis

    client_url, ours = split_url(redis_url, CHATLAB_PARAMETERS)
    prefix = ours["prefix"]
    tagged = MetadataChange("title", True, {"k": "v", "other": "x"})

    async def main() -> None:
        store = RedisChatHistoryStore(redis_url, timeout=5.0)
        try:
            for key in ("deleted", "expired", "swept"):
                await store.append(key, [b"1"])
                await store.set_metadata(key, tagged)
            await store.delete("deleted")
            with redis.Redis.from_url(client_url) as admin:
                names = {name.decode() for name in admin.scan_iter(match=f"{prefix}*")}
            assert not [name for name in names if "deleted" in name]
            assert f"{prefix}{{0}}:tag:1:k:v" in names

            store.retention = 10.0
            store.clock = lambda: time.time() - 9.8  # its keys expire 0.2 s after the write
            await store.append("expired", [b"2"])
            await asyncio.sleep(0.4)
            assert [s.conversation_key for s in await store.summaries(tags={"k": "v"})] == ["swept"]
            assert await store.set_metadata("expired", MetadataChange(tags={"k": "w"})) is None
            store.clock = time.time
            await store.append("expired", [b"3"])  # the same key, a new conversation
            summaries = {s.conversation_key: (s.title, dict(s.tags)) for s in await store.summaries()}
            assert summaries == {"expired": (None, {}), "swept": ("title", {"k": "v", "other": "x"})}
            assert [s.conversation_key for s in await store.summaries(tags={"other": "x"})] == ["swept"]

            store.clock = lambda: 1e12  # everything is due
            assert await store.sweep() == 2
            assert await store.summaries(tags={"k": "v"}) == []
        finally:
            await store.close()
        with redis.Redis.from_url(client_url) as admin:
            assert {name.decode() for name in admin.scan_iter(match=f"{prefix}*")} == {f"{prefix}meta"}

    asyncio.run(main())


def test_a_tag_filtered_page_reads_from_the_smallest_tag_index(redis_url: str) -> None:
    """Conversations that carry a common tag and a rare one page through in key order whichever is named first;
    keys of another prefix, deleted keys and conversations without the other tag are skipped."""

    async def main() -> None:
        store = RedisChatHistoryStore(with_query(redis_url, buckets="3"), timeout=5.0)
        try:
            for n in range(60):
                key = f"c{n:02}"
                await store.append(key, [b"1"])
                tags = {"common": "yes"} | ({"rare": "yes"} if n % 7 == 0 else {})
                await store.set_metadata(key, MetadataChange(tags=tags))
            await store.delete("c14")
            rare = [f"c{n:02}" for n in range(60) if n % 7 == 0 and n != 14]
            for wanted in ({"common": "yes", "rare": "yes"}, {"rare": "yes", "common": "yes"}):
                listed: list[str] = []
                after = None
                while page := await store.summaries(after=after, limit=2, tags=wanted):
                    listed += [s.conversation_key for s in page]
                    after = page[-1].conversation_key
                assert listed == rare
            assert [s.conversation_key for s in await store.summaries("c2", tags={"rare": "yes"})] == ["c21", "c28"]
        finally:
            await store.close()

    asyncio.run(main())


def test_a_page_reads_more_of_a_bucket_that_holds_most_of_it(redis_url: str) -> None:
    """Each bucket is first asked for a share of the page; one that holds more of it is read again, so pages of
    any size still give every conversation once, in key order."""
    layout = Layout("", 8)
    crowded = [key for key in (f"k{n:03}" for n in range(400)) if layout.bucket(key) == 3][:40]
    others = [key for key in (f"k{n:03}" for n in range(400)) if layout.bucket(key) != 3][:12]
    keys = sorted(crowded + others)

    async def main() -> None:
        store = RedisChatHistoryStore(with_query(redis_url, buckets="8"), timeout=5.0)
        try:
            await asyncio.gather(*(store.append(key, [b"1"]) for key in keys))
            for limit in (1, 3, 7, 20, 60):
                listed: list[str] = []
                after = None
                while page := await store.summaries(after=after, limit=limit):
                    assert len(page) == limit or len(listed) + len(page) == len(keys)
                    listed += [s.conversation_key for s in page]
                    after = page[-1].conversation_key
                assert listed == keys, limit
        finally:
            await store.close()

    asyncio.run(main())
