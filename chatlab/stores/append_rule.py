"""The append rule, in one place: what an append does to a conversation, decided from what the store holds.

A store reads, under the lock that makes its append atomic, the conversation's version and message count and the live
idempotency record of the append's key; :func:`decide_append` decides; the store writes what the decision says in the
same atomic step. The memory and SQLite stores call it. Two stores decide on the server, each for a measured reason:
Redis in its Lua script (:data:`chatlab.stores.redis.scripts.APPEND`: only a script is atomic there), PostgreSQL in
its append function (:mod:`chatlab.stores.postgres.appends`: one round trip per batch of appends, about 1.35x the
appends per second of the same batch driven from Python in four more round trips). One table of cases,
``tests/stores/test_append_rule.py``, holds every store, both server-side copies included, to this rule.

The rule, in order:

1. a live idempotency record of the append's key answers it: the version it recorded, as a replay, if the request's
   fingerprint is the recorded one, else :class:`IdempotencyKeyReused`; nothing is written;
2. else ``If-Match`` must hold (:func:`~chatlab.stores.base.version_matches`), else :class:`VersionMismatch` with the
   current version; nothing is written;
3. else the messages go after the last one, and the version keeps its generation with the new count (an empty append
   keeps the version and creates nothing);
4. and an append with an idempotency key records the version it answered.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .base import (
    Idempotency,
    IdempotencyKeyReused,
    VersionMismatch,
    WriteResult,
    appended_version,
    version_matches,
)


@dataclass(frozen=True, slots=True)
class Recorded:
    """A live idempotency record: the fingerprint of the request that made it and the version it answered."""

    fingerprint: str
    version: str


@dataclass(frozen=True, slots=True)
class AppendDecision:
    """What one append does: its answer, and the conversation's version and count after it.

    ``writes_messages``: the messages go after the conversation's last; ``record``: the idempotency record to write
    (``None``: none). A refused or replayed append writes nothing."""

    answer: WriteResult | VersionMismatch | IdempotencyKeyReused
    version: str
    count: int
    writes_messages: bool = False
    record: Recorded | None = None

    def result(self) -> WriteResult:
        """The append's answer to its caller: the result, or the refusal raised."""
        if isinstance(self.answer, WriteResult):
            return self.answer
        raise self.answer


def decide_append(
    version: str,
    count: int,
    added: int,
    *,
    if_match: Collection[str] | None,
    idempotency: Idempotency | None,
    recorded: Recorded | None,
) -> AppendDecision:
    """Decide an append of ``added`` messages to a conversation at ``version`` holding ``count`` messages, given the
    live record of the append's idempotency key (``recorded``; ``None``: no live one)."""
    if idempotency is not None and recorded is not None:
        if recorded.fingerprint != idempotency.fingerprint:
            return AppendDecision(IdempotencyKeyReused(idempotency.key), version, count)
        return AppendDecision(WriteResult(recorded.version, replayed=True), version, count)
    if not version_matches(version, if_match):
        return AppendDecision(VersionMismatch(version), version, count)
    if added:
        count += added
        version = appended_version(version, count)
    record = None if idempotency is None else Recorded(idempotency.fingerprint, version)
    return AppendDecision(WriteResult(version), version, count, writes_messages=added > 0, record=record)


def changes_nothing(
    messages: Sequence[object], if_match: Collection[str] | None, idempotency: Idempotency | None
) -> bool:
    """Whether an append is empty with no condition and no key: it is answered with the current version, read
    without a lock, and writes nothing."""
    return not messages and if_match is None and idempotency is None
