"""The append rule's table: every case of :mod:`chatlab.stores.append_rule`, run through every store against real
servers (memory and SQLite decide with that module, PostgreSQL with its append function, Redis and a Redis Cluster
with their Lua script). Each row names the conversation's state before, the append, and what must happen; nothing
else may change."""

from __future__ import annotations

from dataclasses import dataclass

from chatlab.stores import ChatHistoryStore
from chatlab.stores.base import ABSENT, Idempotency, IdempotencyKeyReused, Version, VersionMismatch, WriteResult
from tests.stores.store_helpers import run_with_store

RECORD_KEY = "k"
RECORDED = "f1"  # the fingerprint of the request that made the record


@dataclass(frozen=True)
class Case:
    """``before``: "absent", "empty" (a conversation of no messages), "stored" (2 messages) or "recorded" (3
    messages, the second appended with idempotency key ``k`` and fingerprint ``f1``). ``if_match``: the conditions,
    by name ("current": the version before). ``answer``: "written", "mismatch", "reused" or "replayed"."""

    name: str
    before: str
    added: int
    answer: str
    if_match: tuple[str, ...] | None = None
    fingerprint: str | None = None  # sent with idempotency key ``k`` (None: no key)


CASES = [
    Case("creates a conversation", "absent", 2, "written"),
    Case("appends after the last message", "stored", 1, "written"),
    Case("appends to an empty conversation", "empty", 1, "written"),
    Case("If-Match the current version holds", "stored", 1, "written", ("current",)),
    Case("If-Match a stale version fails", "stored", 1, "mismatch", ("stale",)),
    Case("If-Match any of a list holds", "stored", 1, "written", ("stale", "current")),
    Case("If-Match an empty list fails", "stored", 1, "mismatch", ()),
    Case("If-Match * fails on an absent conversation", "absent", 1, "mismatch", ("*",)),
    Case("If-Match * holds on a stored conversation", "stored", 1, "written", ("*",)),
    Case("If-Match * holds on an empty conversation", "empty", 1, "written", ("*",)),
    Case("If-Match 0 creates only if absent", "absent", 1, "written", (ABSENT,)),
    Case("If-Match 0 fails on a stored conversation", "stored", 1, "mismatch", (ABSENT,)),
    Case("an empty append keeps the version", "stored", 0, "written"),
    Case("an empty append creates nothing", "absent", 0, "written"),
    Case("an empty append's If-Match still counts", "stored", 0, "mismatch", ("stale",)),
    Case("an empty append's holding If-Match keeps the version", "stored", 0, "written", ("current",)),
    Case("an empty append's key is recorded, creating nothing", "absent", 0, "written", None, "f2"),
    Case("a new key is recorded", "stored", 1, "written", None, "f2"),
    Case("a key on a new conversation is recorded", "absent", 1, "written", None, "f2"),
    Case("a recorded key replays its version", "recorded", 1, "replayed", None, RECORDED),
    Case("a recorded key with another request is refused", "recorded", 1, "reused", None, "f2"),
    Case("a replay comes before If-Match", "recorded", 1, "replayed", ("stale",), RECORDED),
    Case("a reused key comes before If-Match", "recorded", 1, "reused", ("stale",), "f2"),
    Case("an empty append replays too", "recorded", 0, "replayed", None, RECORDED),
]


def _message(key: str, n: int) -> bytes:
    return f'{{"role":"user","contents":[{{"$type":"text","text":"{key} {n}"}}]}}'.encode()


async def _prepare(store: ChatHistoryStore, key: str, before: str) -> str | None:
    """Make ``before``; the version the record of key ``k`` holds (None: no record)."""
    if before == "empty":
        await store.replace(key, [])
    if before in ("stored", "recorded"):
        await store.append(key, [_message(key, 0), _message(key, 1)])
    if before == "recorded":
        recorded = await store.append(key, [_message(key, 2)], idempotency=Idempotency(RECORD_KEY, RECORDED))
        await store.append(key, [_message(key, 3)])  # the conversation moved on: a replay answers the record
        return recorded.version
    return None


def _conditions(if_match: tuple[str, ...] | None, current: str) -> list[str] | None:
    if if_match is None:
        return None
    stale = str(Version("0123456789abcdef", 1))
    names = {"current": current, "stale": stale}
    return [names.get(name, name) for name in if_match]


async def _run(store: ChatHistoryStore, number: int, case: Case) -> None:
    key = f"case{number}"
    recorded = await _prepare(store, key, case.before)
    before = await store.read(key)
    added = [_message(key, 10 + n) for n in range(case.added)]
    idempotency = None if case.fingerprint is None else Idempotency(RECORD_KEY, case.fingerprint)
    try:
        result: WriteResult | Exception = await store.append(
            key, added, if_match=_conditions(case.if_match, before.version), idempotency=idempotency
        )
    except (VersionMismatch, IdempotencyKeyReused) as exc:
        result = exc
    after = await store.read(key)
    unchanged = (after.messages, after.version) == (before.messages, before.version)
    if case.answer == "mismatch":
        assert isinstance(result, VersionMismatch) and result.current == before.version, result
        assert unchanged
    elif case.answer == "reused":
        assert isinstance(result, IdempotencyKeyReused), result
        assert unchanged
    elif case.answer == "replayed":
        assert result == WriteResult(str(recorded), replayed=True), result
        assert unchanged
    else:
        assert isinstance(result, WriteResult) and not result.replayed, result
        assert after.messages == [*before.messages, *added]
        _check_written(before.version, result.version, len(after.messages), bool(added))
        assert after.version == result.version
        if idempotency is not None:  # recorded: a retry replays the answer, and writes nothing
            retry = await store.append(key, added, idempotency=idempotency)
            assert retry == WriteResult(result.version, replayed=True)
            assert await store.read(key) == after


def _check_written(before: str, written: str, count: int, added: bool) -> None:
    """An append keeps the version unless it adds messages; then the generation stays (a new one when there was
    none) and the count is the conversation's."""
    if not added:
        assert written == before
        return
    version = Version.parse(written)
    assert version is not None and version.count == count, written
    generation = Version.parse(before)
    if generation is not None and generation.generation is not None:
        assert version.generation == generation.generation, (before, written)


def test_every_store_follows_the_append_rule(store_url: str) -> None:
    failures: list[str] = []

    async def work(store: ChatHistoryStore) -> None:
        for number, case in enumerate(CASES):
            try:
                await _run(store, number, case)
            except AssertionError as exc:
                failures.append(f"{case.name}: {exc!r}")

    run_with_store(store_url, work)
    assert failures == []


def test_the_table_holds_every_answer_of_the_rule() -> None:
    """Each answer, each state before and each kind of condition is in the table (a row lost is a rule untested)."""
    assert {case.answer for case in CASES} == {"written", "mismatch", "reused", "replayed"}
    assert {case.before for case in CASES} == {"absent", "empty", "stored", "recorded"}
    conditions = {name for case in CASES for name in case.if_match or ()}
    assert conditions == {"current", "stale", "*", ABSENT}
