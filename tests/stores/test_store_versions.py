"""The store contract for versions and idempotency records, on every store, called directly (no HTTP)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence

import pytest
from store_helpers import run_with_store

from chatlab.stores import ChatHistoryStore, ConversationSummary, open_store
from chatlab.stores.base import ABSENT, ANY, Idempotency, IdempotencyKeyReused, VersionMismatch

M1, M2, M3 = b'{"role":"user","contents":[]}', b'{"role":"assistant","contents":[]}', b'{"role":"tool","contents":[]}'


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

    run_with_store(store_url, work)


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

    run_with_store(store_url, work)


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

    run_with_store(store_url, work)


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

    run_with_store(store_url, work)


def test_an_empty_idempotent_append_is_recorded_without_creating_the_conversation(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        assert not (await store.append("c", [], idempotency=Idempotency("k", "fp"))).replayed
        assert await store.summaries() == []
        assert (await store.append("c", [], idempotency=Idempotency("k", "fp"))).replayed
        with pytest.raises(IdempotencyKeyReused):
            await store.append("c", [M1], idempotency=Idempotency("k", "other"))

    run_with_store(store_url, work)


def test_records_expire_after_their_ttl(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        await store.append("c", [M1], idempotency=Idempotency("k", "fp", ttl=0.001))
        await asyncio.sleep(0.05)  # not a timing assertion: only that 50 ms > 1 ms
        assert not (await store.append("c", [M1], idempotency=Idempotency("k", "fp"))).replayed
        assert await store.get("c") == [M1, M1]

    run_with_store(store_url, work)


def test_summaries_by_prefix(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        for key in ("alice/b", "alice/a", "alice0", "alic/x", "bob/a", "alice"):
            await store.append(key, [M1])
        assert [s.conversation_key for s in await store.summaries("alice/")] == ["alice/a", "alice/b"]
        assert [s.conversation_key for s in await store.summaries("bob/")] == ["bob/a"]
        assert await store.summaries("carol/") == []
        assert len(await store.summaries()) == 6

    run_with_store(store_url, work)


def in_threads(store: ChatHistoryStore, jobs: Sequence[Callable[[], Awaitable[None]]]) -> list[BaseException]:
    """Run each job on a thread and event loop of its own, all on one store; what they raised.

    The jobs start together, so they overlap. Every loop keeps running until all jobs are done;
    then one closes the store's connections of every loop (a store object serves several loops
    at once, as under the service's threads).
    """
    errors: list[BaseException] = []
    all_started, all_done, all_closed = (threading.Barrier(len(jobs)) for _ in range(3))

    async def run(n: int, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await asyncio.to_thread(all_started.wait, 60)
            await job()
        except BaseException as exc:
            errors.append(exc)
        await asyncio.to_thread(all_done.wait, 60)
        if n == 0:
            await store.close()
        await asyncio.to_thread(all_closed.wait, 60)

    threads = [threading.Thread(target=lambda n=n, job=job: asyncio.run(run(n, job))) for n, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    return errors


def final_messages(store: ChatHistoryStore, conversation_key: str) -> list[bytes]:
    """The conversation's messages once the threads are done, read on a loop of its own."""

    async def read() -> list[bytes]:
        try:
            return await store.get(conversation_key)
        finally:
            await store.close()

    return asyncio.run(read())


def test_concurrent_conditional_writers_lose_nothing(store_url: str) -> None:
    """Threads with loops of their own race read-then-append-if-match; a refused writer re-reads and retries."""
    store = open_store(store_url)

    async def writer(n: int) -> None:
        for i in range(10):
            while True:
                seen = await store.read("c")
                try:
                    await store.append("c", [f'"{n}-{i}"'.encode()], if_match=[seen.version])
                    break
                except VersionMismatch:
                    pass

    assert in_threads(store, [lambda n=n: writer(n) for n in range(4)]) == []
    assert sorted(final_messages(store, "c")) == sorted(f'"{n}-{i}"'.encode() for n in range(4) for i in range(10))


def test_delete_with_the_current_version_deletes(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        v1 = (await store.append("c", [M1, M2])).version
        await store.delete("c", if_match=[v1])
        assert (await store.read("c")).version == ABSENT and await store.summaries() == []
        await store.append("c", [M1])
        await store.delete("c", if_match=["nope", ANY])  # any of several; "*": it exists
        assert (await store.read("c")).version == ABSENT
        v2 = (await store.replace("e", [])).version  # an empty conversation exists and can be deleted
        await store.delete("e", if_match=[v2])
        assert await store.summaries() == []

    run_with_store(store_url, work)


def test_delete_if_match_on_an_unknown_key_is_read_as_put_reads_it(store_url: str) -> None:
    """``*`` needs the conversation to exist; :data:`ABSENT` holds for an unknown key (nothing to delete)."""

    async def work(store: ChatHistoryStore) -> None:
        with pytest.raises(VersionMismatch) as missing:
            await store.delete("c", if_match=[ANY])
        assert missing.value.current == ABSENT
        await store.delete("c", if_match=[ABSENT])
        v1 = (await store.append("c", [M1])).version
        with pytest.raises(VersionMismatch) as exists:
            await store.delete("c", if_match=[ABSENT])
        assert exists.value.current == v1
        assert await store.summaries() == [ConversationSummary("c", 1)]

    run_with_store(store_url, work)


def test_delete_with_a_stale_version_deletes_nothing(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        v1 = (await store.append("c", [M1])).version
        v2 = (await store.append("c", [M2])).version
        with pytest.raises(VersionMismatch) as stale:
            await store.delete("c", if_match=[v1])
        assert stale.value.current == v2
        with pytest.raises(VersionMismatch):
            await store.delete("c", if_match=[])  # only weak tags were sent: never matches
        snapshot = await store.read("c")
        assert (snapshot.messages, snapshot.version) == ([M1, M2], v2)
        v3 = (await store.replace("c", [M1, M2])).version  # same messages, another generation
        with pytest.raises(VersionMismatch) as replaced:
            await store.delete("c", if_match=[v2])
        assert replaced.value.current == v3
        assert await store.summaries() == [ConversationSummary("c", 2)]

    run_with_store(store_url, work)


def test_a_delete_after_an_append_it_did_not_see_is_refused_and_the_append_survives(store_url: str) -> None:
    """One client reads, another appends, then the first deletes with what it read: refused."""

    async def work(store: ChatHistoryStore) -> None:
        await store.append("c", [M1])
        seen = await store.read("c")
        appended = (await store.append("c", [M2])).version  # another client, between the read and the delete
        with pytest.raises(VersionMismatch) as refused:
            await store.delete("c", if_match=[seen.version])
        assert refused.value.current == appended
        assert await store.get("c") == [M1, M2]

    run_with_store(store_url, work)


def test_delete_without_if_match_is_unchanged(store_url: str) -> None:
    async def work(store: ChatHistoryStore) -> None:
        await store.delete("never")  # an unknown key is not an error
        await store.append("c", [M1])
        await store.replace("d", [M2])
        await store.delete("c")
        await store.delete("c")
        assert await store.get("c") == [] and (await store.read("c")).version == ABSENT
        assert await store.summaries() == [ConversationSummary("d", 1)]

    run_with_store(store_url, work)


def test_conditional_deletes_racing_appends_wipe_only_what_they_read(store_url: str) -> None:
    """Appenders race a client that reads and deletes with the version it read: every message
    appended is either still there or was in a read whose delete succeeded, never wiped unseen."""
    store = open_store(store_url)
    appenders_done: list[int] = []
    deleted: list[bytes] = []

    async def appender(n: int) -> None:
        try:
            for i in range(30):
                await store.append("c", [f'"{n}-{i}"'.encode()])
        finally:
            appenders_done.append(n)

    async def deleter() -> None:
        while len(appenders_done) < 3:
            seen = await store.read("c")
            try:
                await store.delete("c", if_match=[seen.version])
                deleted.extend(seen.messages)
            except VersionMismatch:
                pass  # appended meanwhile: read again

    assert in_threads(store, [lambda n=n: appender(n) for n in range(3)] + [deleter]) == []
    remaining = final_messages(store, "c")
    assert sorted(deleted + remaining) == sorted(f'"{n}-{i}"'.encode() for n in range(3) for i in range(30))
