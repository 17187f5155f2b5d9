"""A migration with clients writing to the target loses no acknowledged write (messages, titles and tags), and every
failure says in one line what was done and what to run next."""

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
from chatlab.stores.metadata import MetadataChange

CONVERSATIONS = 400


def _message(text: str) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"%s"}]}' % text.encode()


async def _fill(url: str) -> dict[str, list[bytes]]:
    store = open_store(url)
    held = {f"conv-{i:04d}": [_message(f"s{i}-{j}") for j in range(1 + i % 3)] for i in range(CONVERSATIONS)}
    try:
        await store.restore(
            [ConversationRecord(key, m, new_version(len(m)), 1.7e9, 1.7e9 + 1) for key, m in held.items()]
        )
    finally:
        await store.close()
    return held


async def _everything(url: str) -> dict[str, list[bytes]]:
    store = open_store(url)
    try:
        return {s.conversation_key: (await store.read(s.conversation_key)).messages for s in await store.summaries()}
    finally:
        await store.close()


async def _with_writers(source: str, target: str, acknowledged: list[tuple[str, bytes]], merge: bool) -> object:
    """``migrate`` while a client appends to the target: to conversations not copied yet, copied ones, new ones."""
    store = open_store(target)
    stop = asyncio.Event()

    async def write() -> None:
        n = 0
        while not stop.is_set():
            i = [CONVERSATIONS - 1 - n, n, CONVERSATIONS + n][n % 3] % (CONVERSATIONS * 2)
            key, message = f"conv-{i:04d}", _message(f"w{len(acknowledged)}")
            await store.append(key, [message])
            acknowledged.append((key, message))  # the store answered: an acknowledged write
            n += 1
            await asyncio.sleep(0)

    writer = asyncio.create_task(write())
    try:
        await asyncio.sleep(0.05)  # some writes land before the copy starts
        return await migrate(source, target, batch=25, merge=merge)
    finally:
        stop.set()
        await writer
        await store.close()


def test_writes_on_the_target_during_a_migration_are_never_lost(tmp_path) -> None:
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    held = asyncio.run(_fill(source))
    acknowledged: list[tuple[str, bytes]] = []
    with pytest.raises(MigrationConflict, match="--no-merge"):  # written in both places already: refused
        asyncio.run(_with_writers(source, target, acknowledged, merge=False))
    report = asyncio.run(_with_writers(source, target, acknowledged, merge=True))  # once: a VersionMismatch crash
    print(report)
    assert report.settled["merged"] > 0  # the writes that came first are kept after the source's messages
    assert acknowledged, "the writer should have written during the migrations"
    result = asyncio.run(_everything(target))
    for key, message in acknowledged:
        assert result[key].count(message) == 1, (key, message)  # not lost, not doubled
    for key, messages in held.items():
        assert result[key][: len(messages)] == messages  # the source's history first, whole
    again = asyncio.run(migrate(source, target))
    assert again.mismatches == [] and again.diverged == [] and again.copied == 0


async def _fill_titled(url: str) -> None:
    """The source's conversations, each with a title and two tags."""
    store = open_store(url)
    try:
        records = [
            ConversationRecord(
                f"conv-{i:04d}",
                [_message(f"s{i}")],
                new_version(1),
                1.7e9,
                1.7e9,
                title=f"source {i}",
                tags={"origin": "source", "n": str(i)},
            )
            for i in range(CONVERSATIONS)
        ]
        await store.restore(records)
    finally:
        await store.close()


async def _with_patches(source: str, target: str) -> dict[str, tuple[str, str]]:
    """``migrate`` while a client PATCHes the target's copies (a title, or a tag the source also carries, or a tag of
    its own); the last acknowledged title and tags of each conversation it wrote."""
    store = open_store(target)
    stop = asyncio.Event()
    acknowledged: dict[str, tuple[str, str]] = {}  # key -> (what, value): the latest acknowledged write of each

    async def patch() -> None:
        n = 0
        while not stop.is_set():
            listed = await store.summaries(limit=CONVERSATIONS)
            for summary in listed[n % 7 :: 7]:  # copies the target holds now, a different stride each round
                key, value = summary.conversation_key, f"target {n}"
                change = [
                    MetadataChange(value, True),
                    MetadataChange(tags={"origin": value}),
                    MetadataChange(tags={"own": value}),
                ][n % 3]
                if await store.set_metadata(key, change) is not None:
                    what = ["title", "origin", "own"][n % 3]
                    acknowledged[f"{key} {what}"] = (what, value)
                n += 1
                await asyncio.sleep(0)
            await asyncio.sleep(0.001)

    writer = asyncio.create_task(patch())
    try:
        await asyncio.sleep(0)
        report = await migrate(source, target, batch=5)
        assert report.mismatches == [], report
    finally:
        stop.set()
        await writer
        await store.close()
    return acknowledged


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_titles_and_tags_patched_on_the_target_during_a_migration_are_kept(kind: str, request, tmp_path) -> None:
    """Every PATCH acknowledged on the target while the migration runs holds at the end: the migration carries the
    source's titles and tags only over what it read, and never over a field the target's clients wrote."""
    source = f"sqlite:///{tmp_path / 'source.db'}"
    target = f"sqlite:///{tmp_path / 'target.db'}" if kind == "sqlite" else request.getfixturevalue(f"{kind}_url")
    asyncio.run(_fill_titled(source))
    acknowledged = asyncio.run(_with_patches(source, target))
    assert len(acknowledged) > 10, "the client should have written during the migration"

    async def held() -> dict[str, tuple[str | None, dict[str, str]]]:
        store = open_store(target)
        try:
            return {s.conversation_key: (s.title, dict(s.tags)) for s in await store.summaries()}
        finally:
            await store.close()

    result = asyncio.run(held())
    for field_key, (what, value) in acknowledged.items():
        key = field_key.split(" ")[0]
        title, tags = result[key]
        assert (title if what == "title" else tags.get(what)) == value, (key, what, value, result[key])
    untouched = [key for key in result if not any(k.startswith(key + " ") for k in acknowledged)]
    for key in untouched:  # the source's metadata where no client wrote
        assert result[key] == (f"source {int(key[5:])}", {"origin": "source", "n": str(int(key[5:]))}), key


def _chatlab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "chatlab", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_a_failed_migration_says_what_was_done_and_what_to_run_next_in_one_line(tmp_path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    asyncio.run(_fill(source))
    failed = _chatlab("migrate", "--from", source, "--to", "redis://127.0.0.1:1/0")
    assert failed.returncode == 3, failed.stderr
    assert "Traceback" not in failed.stderr
    error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "run the same command again" in error[0] and "before anything was copied" in error[0]


def test_a_conflict_is_one_line_with_what_to_run(tmp_path) -> None:
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"

    async def write(url: str, message: bytes) -> None:
        store = open_store(url)
        await store.append("same", [message])
        await store.close()

    asyncio.run(write(source, _message("source")))
    asyncio.run(write(target, _message("target")))
    refused = _chatlab("migrate", "--from", source, "--to", target, "--no-merge")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "nothing was copied" in refused.stderr and "without --no-merge" in refused.stderr
    merged = _chatlab("migrate", "--from", source, "--to", target, "--overwrite")
    assert merged.returncode == 0, merged.stderr
    assert asyncio.run(_everything(target))["same"] == [_message("source"), _message("target")]


def test_a_terminated_migration_says_how_far_it_got_and_a_rerun_finishes(tmp_path) -> None:
    """``kill`` (SIGTERM) with stderr in a pipe: it says how far it got and what to run; the rerun finishes."""
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    held = asyncio.run(_fill(source))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "chatlab", "migrate", "--from", source, "--to", target, "--batch", "1"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    while process.poll() is None and not asyncio.run(_everything(target)):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, said = process.communicate(timeout=60)
    if process.returncode != 0:  # not finished before the signal came
        assert process.returncode == 130 and "Traceback" not in said, said
        assert "interrupted with at least" in said.splitlines()[-1]
        assert "run the same command again" in said.splitlines()[-1]
    again = _chatlab("migrate", "--from", source, "--to", target)
    assert again.returncode == 0 and "all verified" in again.stderr
    assert asyncio.run(_everything(target)) == held
