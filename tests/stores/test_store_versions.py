"""The store contract for versions and idempotency records, on every store, called directly (no HTTP)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatlab.stores import ChatHistoryStore, ConversationSummary, open_store
from chatlab.stores.base import ABSENT, ANY, Idempotency, IdempotencyKeyReused, VersionMismatch

M1, M2, M3 = b'{"role":"user","contents":[]}', b'{"role":"assistant","contents":[]}', b'{"role":"tool","contents":[]}'


def run(store_url: str, work) -> None:
    async def main() -> None:
        store = open_store(store_url)
        try:
            await work(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_every_write_gets_a_new_version_and_reads_see_it(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        assert (await store.read("c")).version == ABSENT
        v1 = (await store.append("c", [M1])).version
        assert v1 != ABSENT
        snapshot = await store.read("c")
        assert (snapshot.messages, snapshot.version) == ([M1], v1)
        v2 = (await store.append("c", [M2])).version
        v3 = (await store.replace("c", [M3])).version
        assert len({ABSENT, v1, v2, v3}) == 4
        assert (await store.append("c", [])).version == v3  # an empty batch writes nothing
        assert await store.get("c") == [M3]
        await store.delete("c")
        assert (await store.read("c")).version == ABSENT
        v4 = (await store.append("c", [M1])).version
        assert v4 not in (v1, v2, v3, ABSENT)  # never an old version again after a delete
        v5 = (await store.replace("e", [])).version  # an empty conversation exists and has a version
        assert v5 != ABSENT and (await store.read("e")).version == v5

    run(store_url, work)


def test_if_match_writes_only_at_the_expected_version(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        with pytest.raises(VersionMismatch) as missing:
            await store.append("c", [M1], if_match=[ANY])  # "exists" fails on an unknown key
        assert missing.value.current == ABSENT
        with pytest.raises(VersionMismatch):
            await store.replace("c", [M1], if_match=[ANY])
        assert await store.summaries() == []  # a refused write creates nothing

        v1 = (await store.append("c", [M1], if_match=[ABSENT])).version  # create only if absent
        with pytest.raises(VersionMismatch) as stale:
            await store.append("c", [M2], if_match=[ABSENT])
        assert stale.value.current == v1
        v2 = (await store.append("c", [M2], if_match=[v1])).version
        with pytest.raises(VersionMismatch) as changed:
            await store.replace("c", [M3], if_match=[v1])
        assert changed.value.current == v2
        with pytest.raises(VersionMismatch):
            await store.append("c", [], if_match=[v1])  # the condition holds for an empty batch too
        assert await store.get("c") == [M1, M2]
        v3 = (await store.replace("c", [M3], if_match=["nope", v2])).version  # any of several
        assert (await store.append("c", [M1], if_match=[ANY])).version not in (v3, ABSENT)
        with pytest.raises(VersionMismatch):
            await store.append("c", [M1], if_match=[])  # only weak tags were sent: never matches
        assert await store.get("c") == [M3, M1]

    run(store_url, work)


def test_an_idempotent_append_is_applied_once(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        first = await store.append("c", [M1, M2], idempotency=Idempotency("k1", "fp1"))
        assert not first.replayed
        again = await store.append("c", [M1, M2], idempotency=Idempotency("k1", "fp1"))
        assert again.replayed and again.version == first.version
        assert await store.get("c") == [M1, M2]

        with pytest.raises(IdempotencyKeyReused):
            await store.append("c", [M3], idempotency=Idempotency("k1", "fp-other"))
        await store.append("c", [M3], idempotency=Idempotency("k2", "fp3"))
        # after other writes, the retry of k1 still answers what k1 did (its version then)
        late = await store.append("c", [M1, M2], idempotency=Idempotency("k1", "fp1"))
        assert late.replayed and late.version == first.version
        # keys are per conversation: the same key on another conversation is another request
        assert not (await store.append("d", [M1], idempotency=Idempotency("k1", "fp1"))).replayed
        assert await store.get("c") == [M1, M2, M3]
        assert await store.summaries() == [ConversationSummary("c", 3), ConversationSummary("d", 1)]

        # the record outlives a delete: a late retry does not bring the conversation back
        await store.delete("c")
        assert (await store.append("c", [M1, M2], idempotency=Idempotency("k1", "fp1"))).replayed
        assert await store.get("c") == []

    run(store_url, work)


def test_a_replay_wins_over_if_match_and_a_refused_write_records_nothing(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        v1 = (await store.append("c", [M1])).version
        done = await store.append("c", [M2], if_match=[v1], idempotency=Idempotency("k", "fp"))
        # the retry of a conditional append whose answer was lost: its own write moved the version
        retry = await store.append("c", [M2], if_match=[v1], idempotency=Idempotency("k", "fp"))
        assert retry.replayed and retry.version == done.version

        with pytest.raises(VersionMismatch):
            await store.append("c", [M3], if_match=[v1], idempotency=Idempotency("k2", "fp2"))
        ok = await store.append("c", [M3], if_match=[done.version], idempotency=Idempotency("k2", "fp2"))
        assert not ok.replayed  # the refused attempt left no record
        assert await store.get("c") == [M1, M2, M3]

    run(store_url, work)


def test_an_empty_idempotent_append_is_recorded_without_creating_the_conversation(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        assert not (await store.append("c", [], idempotency=Idempotency("k", "fp"))).replayed
        assert await store.summaries() == []
        assert (await store.append("c", [], idempotency=Idempotency("k", "fp"))).replayed
        with pytest.raises(IdempotencyKeyReused):
            await store.append("c", [M1], idempotency=Idempotency("k", "other"))

    run(store_url, work)


def test_records_expire_after_their_ttl(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        await store.append("c", [M1], idempotency=Idempotency("k", "fp", ttl=0.001))
        await asyncio.sleep(0.05)  # not a timing assertion: only that 50 ms > 1 ms
        assert not (await store.append("c", [M1], idempotency=Idempotency("k", "fp"))).replayed
        assert await store.get("c") == [M1, M1]

    run(store_url, work)


def test_summaries_by_prefix(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        for key in ("alice/b", "alice/a", "alice0", "alic/x", "bob/a", "alice"):
            await store.append(key, [M1])
        assert [s.conversation_key for s in await store.summaries("alice/")] == ["alice/a", "alice/b"]
        assert [s.conversation_key for s in await store.summaries("bob/")] == ["bob/a"]
        assert await store.summaries("carol/") == []
        assert len(await store.summaries()) == 6

    run(store_url, work)


def test_concurrent_conditional_writers_lose_nothing(store_url: str) -> None:
    """Threads with loops of their own race read-then-append-if-match; a refused writer re-reads and retries."""
    store = open_store(store_url)
    refusals: list[int] = []
    errors: list[BaseException] = []
    all_written = threading.Barrier(4)
    all_closed = threading.Barrier(4)

    async def writer(n: int) -> None:
        try:
            for i in range(10):
                while True:
                    seen = await store.read("c")
                    try:
                        await store.append("c", [f'"{n}-{i}"'.encode()], if_match=[seen.version])
                        break
                    except VersionMismatch:
                        refusals.append(n)
        except BaseException as exc:
            errors.append(exc)
        # keep every loop running until all are done; then one thread closes the connections of all
        await asyncio.to_thread(all_written.wait, 60)
        if n == 0:
            await store.close()
        await asyncio.to_thread(all_closed.wait, 60)

    threads = [threading.Thread(target=lambda n=n: asyncio.run(writer(n))) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and errors == []

    async def check() -> None:
        try:
            messages = await store.get("c")
        finally:
            await store.close()
        assert sorted(messages) == sorted(f'"{n}-{i}"'.encode() for n in range(4) for i in range(10))

    asyncio.run(check())
