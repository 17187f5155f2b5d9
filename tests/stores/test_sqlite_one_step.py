"""SQLite appends written in one statement (chatlab.stores.sqlite_one_step): each group must get the answers and leave
the tables exactly as the transaction path (sqlite_append.append_group) would, and a hint that another connection
made stale, a replayed key or an existing conversation assumed absent must make it write nothing and hand over."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatlab.stores import base
from chatlab.stores import sqlite_one_step as one_step
from chatlab.stores.base import ABSENT, ANY, Idempotency, IdempotencyKeyReused, VersionMismatch
from chatlab.stores.sqlite import SqliteChatHistoryStore
from chatlab.stores.sqlite_append import Outcome, Request, append_group
from chatlab.stores.sqlite_one_step import OneStepAppends

KEYS = ["a", "b", 'c\x00\u2028é🙂"\\', "d"]
NOW = 1_000_000.0


def _message(i: int) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"m%d \xc3\xa9 \\" \\u2028"}]}' % i


@pytest.fixture
def generations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """New conversations get the same generation in both paths (a fallback would otherwise draw another)."""
    monkeypatch.setattr(base, "new_generation", lambda: "g")
    yield


def _connection(path: Path) -> sqlite3.Connection:
    store = SqliteChatHistoryStore(path)
    return store._connect()


def _tables(conn: sqlite3.Connection) -> list[list[tuple[Any, ...]]]:
    return [
        conn.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall()
        for table, columns, order in (
            ("chatlab_conversations", "*", "conversation_key"),
            ("chatlab_messages", "conversation_key, position, body, typeof(body)", "conversation_key, position"),
            ("chatlab_idempotency", "*", "conversation_key, idempotency_key"),
        )
    ]


def _in_transaction(conn: sqlite3.Connection, requests: list[Request], learn: Any = lambda states: None) -> list[Any]:
    conn.execute("BEGIN IMMEDIATE")
    outcomes = append_group(conn, requests, NOW, NOW, lambda: None, learn)
    conn.execute("COMMIT")
    return outcomes


def _answers(outcomes: list[Outcome]) -> list[Any]:
    return [
        (type(error).__name__, getattr(error, "current", None)) if error else (result.version, result.replayed)
        for result, error in outcomes
    ]


def _random_group(rng: random.Random, versions: dict[str, str], used: list[tuple[str, str, str]]) -> list[Request]:
    group: list[Request] = []
    for _ in range(rng.randint(1, 6)):
        key = rng.choice(KEYS)
        batch = [_message(rng.randrange(1000)) for _ in range(rng.choice([0, 1, 1, 2, 4]))]
        if_match = rng.choice(
            [
                None,
                None,
                None,
                [versions.get(key, ABSENT)],
                ["stale.1"],
                [ANY],
                [ABSENT],
                [versions.get(key, ABSENT), "x"],
            ]
        )
        idempotency = None
        roll = rng.random()
        if roll < 0.5:
            idempotency = Idempotency(f"k{rng.randrange(10**9)}", "fp")
        elif roll < 0.7 and used:
            record_key, idem, fingerprint = rng.choice(used)
            if record_key == key:
                idempotency = Idempotency(idem, fingerprint if rng.random() < 0.7 else "other")
        if idempotency is not None:
            used.append((key, idempotency.key, idempotency.fingerprint))
        group.append((key, batch, if_match, idempotency))
    return group


def test_groups_answer_and_write_as_the_transaction_path(tmp_path: Path, generations: None) -> None:
    """Random groups (conditions current, stale, '*' and absent; replays; reused keys; empty appends; keys with
    NUL and non-ASCII) through the one statement, falling back as the writer does, and through the transaction."""
    rng = random.Random(7)
    fast, slow = _connection(tmp_path / "fast.db"), _connection(tmp_path / "slow.db")
    appends = OneStepAppends()
    versions: dict[str, str] = {}
    used: list[tuple[str, str, str]] = []
    kinds = {"one step": 0, "fell back": 0}
    seen: set[str] = set()
    for _ in range(300):
        group = _random_group(rng, versions, used)
        outcomes = appends.attempt(fast, group, NOW, NOW)
        kinds["one step" if outcomes is not None else "fell back"] += 1
        if outcomes is None:
            outcomes = _in_transaction(fast, group, appends.known.learn)
        expected = _in_transaction(slow, group)
        assert _answers(outcomes) == _answers(expected), group
        seen |= {
            type(error).__name__ if error else ("replayed" if result.replayed else "ok") for result, error in expected
        }
        for key, version in slow.execute("SELECT conversation_key, version FROM chatlab_conversations"):
            versions[key] = version
        assert _tables(fast) == _tables(slow)
    assert kinds["one step"] > 80 and kinds["fell back"] > 40, kinds
    assert {"ok", "replayed", "VersionMismatch", "IdempotencyKeyReused"} <= seen, seen


def test_a_state_another_connection_changed_is_found_and_the_group_falls_back(tmp_path: Path) -> None:
    conn, other = _connection(tmp_path / "x.db"), _connection(tmp_path / "x.db")
    appends = OneStepAppends()
    first = appends.attempt(conn, [("c", [_message(1)], None, None)], NOW, NOW)
    assert first is not None  # a new conversation, assumed absent: one step
    _in_transaction(other, [("c", [_message(2)], None, None)])  # another process appends meanwhile
    assert appends.attempt(conn, [("c", [_message(3)], None, None)], NOW, NOW) is None
    assert _tables(conn)[1] == _tables(other)[1]  # nothing written by the refused statement
    assert appends.known.get("c") is None
    outcomes = _in_transaction(conn, [("c", [_message(3)], None, None)], appends.known.learn)
    assert outcomes[0][0] is not None and outcomes[0][0].version.endswith(".3")
    assert [row[1] for row in _tables(conn)[1]] == [0, 1, 2]
    # the transaction refreshed the hint: the next append is one step again
    again = appends.attempt(conn, [("c", [_message(4)], None, None)], NOW, NOW)
    assert again is not None and again[0][0] is not None and again[0][0].version.endswith(".4")


def test_an_existing_conversation_assumed_absent_falls_back(tmp_path: Path) -> None:
    conn, other = _connection(tmp_path / "x.db"), _connection(tmp_path / "x.db")
    _in_transaction(other, [("c", [_message(1)], None, None)])
    appends = OneStepAppends()  # knows nothing: assumes "c" absent
    assert appends.attempt(conn, [("c", [_message(2)], None, None)], NOW, NOW) is None
    assert appends.attempt(conn, [("c", [], [ABSENT], None)], NOW, NOW) is None  # a refusal is checked too


def test_a_refusal_on_a_stale_hint_is_checked(tmp_path: Path) -> None:
    """If-Match against the hint's version would refuse; the database has the version asked for: no refusal."""
    conn, other = _connection(tmp_path / "x.db"), _connection(tmp_path / "x.db")
    appends = OneStepAppends()
    appends.attempt(conn, [("c", [_message(1)], None, None)], NOW, NOW)
    moved = _in_transaction(other, [("c", [_message(2)], None, None)])[0][0].version
    assert appends.attempt(conn, [("c", [_message(3)], [moved], None)], NOW, NOW) is None
    assert _in_transaction(conn, [("c", [_message(3)], [moved], None)])[0][1] is None


def test_a_used_idempotency_key_falls_back_and_replays(tmp_path: Path) -> None:
    conn = _connection(tmp_path / "x.db")
    appends = OneStepAppends()
    request: Request = ("c", [_message(1)], None, Idempotency("k", "fp"))
    done = appends.attempt(conn, [request], NOW, NOW)
    assert done is not None
    assert appends.attempt(conn, [request], NOW, NOW) is None  # the record's unique index refuses the key
    replay = _in_transaction(conn, [request], appends.known.learn)[0][0]
    assert replay is not None and replay.replayed and replay.version == done[0][0].version  # type: ignore[union-attr]
    # a key used twice within one group: the second is a replay, decided by the transaction
    assert appends.attempt(conn, [("c", [_message(2)], None, Idempotency("k2", "fp"))] * 2, NOW, NOW) is None
    # an idempotent append its If-Match refuses: a record could replay it, which only the transaction reads
    assert appends.attempt(conn, [("c", [_message(2)], ["nope"], Idempotency("k3", "fp"))], NOW, NOW) is None


def test_a_large_group_takes_the_transaction(tmp_path: Path) -> None:
    conn = _connection(tmp_path / "x.db")
    requests: list[Request] = [(f"c{i}", [_message(i)], None, None) for i in range(one_step.MAX_ROWS + 1)]
    assert OneStepAppends().attempt(conn, requests, NOW, NOW) is None
    assert _tables(conn)[1] == []


def test_the_largest_group_fits_the_oldest_parameter_limit(tmp_path: Path) -> None:
    conn = _connection(tmp_path / "x.db")
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # as SQLite before 3.32
    requests: list[Request] = [(f"c{i}", [_message(i)], None, None) for i in range(one_step.MAX_ROWS)]
    assert OneStepAppends().attempt(conn, requests, NOW, NOW) is not None
    assert len(_tables(conn)[1]) == one_step.MAX_ROWS


def test_a_key_sqlite3_cannot_bind_takes_the_transaction(tmp_path: Path) -> None:
    conn = _connection(tmp_path / "x.db")
    assert OneStepAppends().attempt(conn, [("lone \ud800", [_message(1)], None, None)], NOW, NOW) is None
    assert _tables(conn)[1] == []


def test_a_sqlite_that_cannot_run_the_trigger_uses_the_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = one_step.INBOX[1].replace("json_each(", "no_such_function(")
    monkeypatch.setattr(one_step, "INBOX", (one_step.INBOX[0], broken))
    conn = _connection(tmp_path / "x.db")
    appends = OneStepAppends()
    with caplog.at_level(logging.WARNING, logger=one_step.__name__):
        assert appends.attempt(conn, [("c", [_message(1)], None, None)], NOW, NOW) is None
        assert appends.attempt(conn, [("c", [_message(1)], None, None)], NOW, NOW) is None
    assert len([r for r in caplog.records if "one step" in r.getMessage()]) == 1  # said once
    assert _tables(conn)[1] == []


def test_the_store_writes_one_step_groups_that_other_connections_see(tmp_path: Path) -> None:
    """Through the store (the writer thread, real groups): acknowledged appends are committed, in order, and most
    groups were one statement; a second store on the file (another process) appending in between is not lost."""

    async def main() -> None:
        path = tmp_path / "x.db"
        store, other = SqliteChatHistoryStore(path), SqliteChatHistoryStore(path)
        answers: list[bool] = []
        attempt = store._one_step.attempt

        def counted(*args: Any) -> Any:
            outcomes = attempt(*args)
            answers.append(outcomes is not None)
            return outcomes

        store._one_step.attempt = counted  # type: ignore[method-assign]
        try:
            await store.append("c", [_message(0)])
            store._next_expiry = float("inf")  # no expiry sweep: every group may be one step
            for round_ in range(1, 20):
                await asyncio.gather(*(store.append(f"k{i}", [_message(round_)]) for i in range(8)))
                if round_ % 5 == 0:
                    await other.append("k0", [_message(-round_)])
            for i in range(8):
                expected = [_message(r) for r in range(1, 20)]
                if i == 0:
                    for r in (5, 10, 15):
                        expected.insert(expected.index(_message(r)) + 1, _message(-r))
                assert await other.get(f"k{i}") == expected
                assert (await other.read(f"k{i}")).version.endswith(f".{len(expected)}")
            assert sum(answers) > len(answers) // 2, answers
            assert not all(answers)  # the other store's appends made a hint stale
        finally:
            await store.close()
            await other.close()

    asyncio.run(main())


def test_replace_and_delete_drop_the_hint(tmp_path: Path) -> None:
    async def main() -> None:
        store = SqliteChatHistoryStore(tmp_path / "x.db")
        try:
            await store.append("c", [_message(1)])
            await store.replace("c", [_message(2), _message(3)])
            assert store._one_step.known.get("c") is None
            assert (await store.append("c", [_message(4)])).version.endswith(".3")
            await store.delete("c")
            assert store._one_step.known.get("c") is None
            assert (await store.append("c", [_message(5)])).version.endswith(".1")
            assert await store.get("c") == [_message(5)]
            with pytest.raises(VersionMismatch):
                await store.append("c", [_message(6)], if_match=["stale.1"])
            await store.append("c", [], idempotency=Idempotency("k", "fp"))
            with pytest.raises(IdempotencyKeyReused):
                await store.append("c", [_message(6)], idempotency=Idempotency("k", "other"))
        finally:
            await store.close()

    asyncio.run(main())


def test_one_step_groups_take_at_most_a_share_of_the_queue(tmp_path: Path) -> None:
    """Appends queued while the writer is busy are written in groups of at most ONE_STEP_GROUP (the next gathers
    while one is written), all of them, each conversation's in order."""
    from chatlab.stores import _group_commit

    async def main() -> None:
        store = SqliteChatHistoryStore(tmp_path / "x.db")
        sizes: list[int] = []
        release = threading.Event()
        attempt = store._one_step.attempt

        def held(conn: sqlite3.Connection, requests: list[Request], *args: Any) -> Any:
            if not sizes:
                release.wait(10)  # the first group holds the writer while the others queue
            sizes.append(len(requests))
            return attempt(conn, requests, *args)

        store._one_step.attempt = held  # type: ignore[method-assign]
        store._next_expiry = float("inf")
        try:
            first = asyncio.ensure_future(store.append("c0", [_message(0)]))
            await asyncio.sleep(0.05)  # the writer thread is inside the first group
            rest = [asyncio.ensure_future(store.append(f"c{i % 3}", [_message(i)])) for i in range(1, 21)]
            await asyncio.sleep(0)
            release.set()
            await asyncio.gather(first, *rest)
            assert sizes[0] == 1 and sum(sizes) == 21
            assert max(sizes[1:]) == _group_commit.ONE_STEP_GROUP and len(sizes) >= 4, sizes
            for c in range(3):
                assert await store.get(f"c{c}") == [_message(i) for i in range(21) if i % 3 == c]
        finally:
            await store.close()

    asyncio.run(main())
