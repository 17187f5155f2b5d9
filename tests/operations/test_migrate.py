"""Migration between real stores, 10,000 conversations, killed halfway and resumed: nothing lost or doubled."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from chatlab.operations import MigrationConflict, migrate
from chatlab.stores import open_store
from chatlab.stores.base import ConversationRecord, new_version

COUNT = 10_000


def _records(start: int, stop: int) -> list[ConversationRecord]:
    return [
        ConversationRecord(
            f"conv-{i:05d}",
            [b'{"role":"user","contents":[{"$type":"text","text":"%d"}]}' % i] * (1 + i % 3),
            new_version(1 + i % 3),
            1_700_000_000.0 + i,
            1_700_000_100.0 + i,
        )
        for i in range(start, stop)
    ]


async def _fill(url: str) -> None:
    store = open_store(url)
    try:
        for start in range(0, COUNT, 1000):
            await store.restore(_records(start, min(COUNT, start + 1000)))
    finally:
        await store.close()


async def _count(url: str) -> int:
    store = open_store(url)
    try:
        return len(await store.summaries())
    finally:
        await store.close()


async def _contents(url: str) -> dict[str, tuple[list[bytes], str, float | None, float | None]]:
    store = open_store(url)
    try:
        summaries = await store.summaries()
        return {
            s.conversation_key: ((await store.read(s.conversation_key)).messages, s.version, s.created_at, s.updated_at)
            for s in summaries
        }
    finally:
        await store.close()


def _interrupted_then_resumed(source: str, target: str) -> None:
    asyncio.run(_fill(source))
    command = [sys.executable, "-m", "chatlab", "migrate", "--from", source, "--to", target, "--batch", "250"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        while process.poll() is None and asyncio.run(_count(target)) < 2_000:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        _, said = process.communicate()
    # killed with its stderr in a pipe (no terminal): it said at the start how to go on
    assert b"if it is interrupted, run the same command again" in said.splitlines()[0]
    halfway = asyncio.run(_count(target))
    assert 0 < halfway < COUNT, "the migration should have been stopped partway"
    report = asyncio.run(migrate(source, target, batch=500))
    print(report, f"(killed after {halfway})")
    assert report.total == COUNT and report.already == halfway and report.copied == COUNT - halfway
    assert report.mismatches == []
    assert asyncio.run(_contents(target)) == asyncio.run(_contents(source))  # messages, versions and times
    again = asyncio.run(migrate(source, target))
    assert (again.copied, again.already, again.mismatches) == (0, COUNT, [])


def test_sqlite_to_postgres(sqlite_url, postgres_url) -> None:
    _interrupted_then_resumed(sqlite_url, postgres_url)


def test_postgres_to_redis(postgres_url, redis_url) -> None:
    _interrupted_then_resumed(postgres_url, redis_url)


def test_a_target_written_in_both_places_is_refused_then_merged_never_overwritten(tmp_path) -> None:
    """--overwrite once wiped the target's own writes: a migration now keeps them after the source's."""
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    old, new = b'{"role":"user","contents":[]}', b'{"role":"assistant","contents":[]}'

    async def write(url: str, key: str, message: bytes) -> None:
        store = open_store(url)
        await store.append(key, [message])
        await store.close()

    asyncio.run(write(source, "same", old))
    asyncio.run(write(source, "other", old))
    asyncio.run(write(target, "same", new))  # a client wrote to the target before it was copied
    with pytest.raises(MigrationConflict, match=r"'same'.*nothing was copied.*without --no-merge"):
        asyncio.run(migrate(source, target, merge=False))
    assert asyncio.run(_count(target)) == 1  # nothing written
    for _ in range(2):  # by default merged, once: the second run finds it done
        report = asyncio.run(migrate(source, target))
        assert report.mismatches == [] and report.diverged == []
    contents = asyncio.run(_contents(target))
    assert contents["same"][0] == [old, new] and contents["other"][0] == [old]
    with pytest.raises(ValueError, match="memory://"):
        asyncio.run(migrate("memory://", target))
