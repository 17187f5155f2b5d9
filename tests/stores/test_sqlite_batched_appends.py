"""SQLite appends queued together run as one batch (a few statements for all): each caller must still get the answer
of its own append, as if the appends had run one after another in queue order, and a refused one writes nothing.

The writer thread is held by a blocking write while the appends queue, so all of them share one group."""

from __future__ import annotations

import asyncio
import functools
import random
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from chatlab.stores.base import (
    ABSENT,
    Idempotency,
    IdempotencyKeyReused,
    VersionMismatch,
    WriteResult,
    appended_version,
    version_matches,
)
from chatlab.stores.sqlite import SqliteChatHistoryStore
from chatlab.stores.sqlite.writer import MAX_GROUP

KEYS = ["a", "b", 'c\x00\u2028é🙂"\\', "d"]  # keys and records go through a JSON array: any text


def _message(i: int) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"m%d"}]}' % i


async def _one_group(store: SqliteChatHistoryStore, calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``calls`` (each starts one write) queued while a write holds the writer thread: they join its group (one
    transaction) and run there in queue order after it."""
    writer = store.writer
    groups, writes = writer.groups, writer.writes
    release = threading.Event()
    held = asyncio.ensure_future(writer.submit(lambda conn: release.wait(10)))
    await asyncio.sleep(0.05)  # the writer thread is now inside the blocking write
    tasks = [asyncio.ensure_future(call()) for call in calls]
    await asyncio.sleep(0)  # each task queued its write (in creation order)
    release.set()
    await held
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert (writer.groups - groups, writer.writes - writes) == (1, 1 + len(calls))  # the blocking write, then all
    return results


class Model:
    """Appends one after another: what each caller must get, and what the conversations must hold."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = dict(versions)
        self.messages: dict[str, list[bytes]] = {key: [_message(-1)] for key in versions}
        self.records: dict[tuple[str, str], tuple[str, str]] = {}

    def append(self, key: str, batch: list[bytes], if_match: list[str] | None, idem: Idempotency | None) -> Any:
        if idem is not None and (record := self.records.get((key, idem.key))) is not None:
            return WriteResult(record[1], replayed=True) if record[0] == idem.fingerprint else IdempotencyKeyReused
        if not version_matches(self.versions[key], if_match):
            return (VersionMismatch, self.versions[key])
        if batch:
            self.messages[key] += batch
            self.versions[key] = appended_version(self.versions[key], len(self.messages[key]))
        if idem is not None:
            self.records[key, idem.key] = (idem.fingerprint, self.versions[key])
        return WriteResult(self.versions[key])


@pytest.mark.parametrize("seed", range(4))
def test_each_append_of_a_batch_gets_its_own_answer(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)

    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db")
        try:
            first = {key: (await store.append(key, [_message(-1)])).version for key in KEYS}
            model = Model(first)
            calls: list[Callable[[], Awaitable[Any]]] = []
            expected: list[Any] = []
            for i in range(120):
                key = rng.choice(KEYS)
                batch = [_message(i * 10 + j) for j in range(rng.choice([0, 1, 2, 4]))]
                if_match = rng.choice([None, None, [first[key]], [model.versions[key]], ["*"], [ABSENT]])
                idem = rng.choice([None, Idempotency(f"k{rng.randrange(8)}", rng.choice(["x", "y"]))])
                if not batch and if_match is None and idem is None:
                    idem = Idempotency(f"k{i}", "x")  # an empty append without conditions is a read, not a write
                expected.append(model.append(key, batch, if_match, idem))
                calls.append(functools.partial(store.append, key, batch, if_match=if_match, idempotency=idem))
            results = await _one_group(store, calls)
            for result, want in zip(results, expected, strict=True):
                if isinstance(want, tuple):  # refused: the version it was refused against
                    assert isinstance(result, VersionMismatch) and result.current == want[1]
                elif want is IdempotencyKeyReused:
                    assert isinstance(result, IdempotencyKeyReused)
                else:
                    assert result == want
            assert {key: await store.get(key) for key in KEYS} == model.messages  # refused appends left no row
            for key in KEYS:
                assert (await store.read(key)).version == model.versions[key]
            for (key, record), (fingerprint, version) in model.records.items():  # refused keys did not overwrite
                assert await store.append(key, [], idempotency=Idempotency(record, fingerprint)) == WriteResult(
                    version, replayed=True
                )
        finally:
            await store.close()

    asyncio.run(scenario())


def test_writes_between_appends_of_a_group_keep_their_order(tmp_path: Path) -> None:
    """A delete queued between appends splits them into two batches, each reading what the delete left."""

    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db")
        try:
            old = (await store.append("k", [_message(0)])).version
            calls: list[Callable[[], Awaitable[Any]]] = [
                lambda: store.append("k", [_message(1)], if_match=[old]),
                lambda: store.delete("k"),
                lambda: store.append("k", [_message(2)], if_match=[old]),  # stale: the conversation is gone
                lambda: store.append("k", [_message(3)], if_match=[ABSENT]),
                lambda: store.append("k", [_message(4)]),
            ]
            grown, deleted, stale, created, last = await _one_group(store, calls)
            assert grown.version == appended_version(old, 2) and deleted is None
            assert isinstance(stale, VersionMismatch) and stale.current == ABSENT
            assert created.version.endswith(".1") and created.version.split(".")[0] != old.split(".")[0]
            assert last == WriteResult(appended_version(created.version, 2))
            assert await store.get("k") == [_message(3), _message(4)]
        finally:
            await store.close()

    asyncio.run(scenario())


def test_more_appends_than_a_group_holds_are_all_written(tmp_path: Path) -> None:
    """Appends past :data:`MAX_GROUP` go to the next group; a full group's statements fit SQLite's parameter limit."""

    async def scenario() -> None:
        store = SqliteChatHistoryStore(tmp_path / "h.db")
        try:
            writer = store.writer
            release = threading.Event()
            held = asyncio.ensure_future(writer.submit(lambda conn: release.wait(10)))
            await asyncio.sleep(0.05)  # the writer thread is now inside the blocking write
            count = MAX_GROUP + 50
            appends = [
                asyncio.ensure_future(store.append(f"k{i}", [_message(i)], idempotency=Idempotency(f"i{i}", "f")))
                for i in range(count)
            ]
            await asyncio.sleep(0)
            release.set()
            await held
            results = await asyncio.gather(*appends)
            assert all(result.version.endswith(".1") and not result.replayed for result in results)
            assert writer.writes == count + 1 and writer.groups == 2  # a full group, then the rest
            assert [len(await store.get(f"k{i}")) for i in range(count)] == [1] * count
        finally:
            await store.close()

    asyncio.run(scenario())
