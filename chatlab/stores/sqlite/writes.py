"""What each write of the SQLite store does in the group's ``BEGIN IMMEDIATE`` transaction (:mod:`.writer`), which
holds the write lock from its first read (a check and its write are one step, also against other processes); each
append is decided by :func:`~chatlab.stores.append_rule.decide_append`."""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace as replace_fields
from typing import NamedTuple

from ...authors import count_authors
from ..append_rule import AppendDecision, Recorded, decide_append
from ..base import (
    ABSENT,
    ConversationRecord,
    ConversationSummary,
    Idempotency,
    Metadata,
    VersionMismatch,
    WriteResult,
    json_object,
    new_version,
    version_matches,
)
from ..metadata import MetadataChange
from . import statements as sql
from .reads import summary
from .writer import Outcome

EXPIRY_INTERVAL = 1.0  # seconds between deletions of expired idempotency records (a lookup ignores them meanwhile)


class Append(NamedTuple):
    """One append, as the store was asked for it, with how many of its messages each author signed."""

    conversation_key: str
    messages: list[bytes]
    if_match: Collection[str] | None
    idempotency: Idempotency | None
    authors: Mapping[str, int]


class _Held(NamedTuple):
    """What a batch of appends knows of one conversation: as stored, then as each written append leaves it."""

    version: str
    message_count: int
    participants: dict[str, int]


def added(participants: Mapping[str, int], authors: Mapping[str, int]) -> dict[str, int]:
    """``participants`` with what ``authors`` signed added to their counts."""
    total = dict(participants)
    for author, count in authors.items():
        total[author] = total.get(author, 0) + count
    return total


def check(conn: sqlite3.Connection, conversation_key: str, if_match: Collection[str] | None) -> None:
    """Raise :class:`VersionMismatch` unless the conversation satisfies ``if_match``."""
    row = conn.execute(sql.COUNT_AND_VERSION, (conversation_key,)).fetchone()
    version = row[1] if row is not None else ABSENT
    if not version_matches(version, if_match):
        raise VersionMismatch(version)


class Appends:
    """The appends queued together, one batch of the writer: one read of the versions, counts and records they need,
    each decided in queue order as if alone (its idempotency record first, then ``if_match``; a refused one writes
    nothing), then one ``executemany`` per table. ``clock`` stamps the conversations."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._next_expiry = 0.0  # when expired records are next deleted (only the writer thread calls this)

    def __call__(self, conn: sqlite3.Connection, appends: list[Append]) -> list[Outcome]:
        now = time.time()  # wall-clock time: idempotency records that expire at or before it are dead
        written = self._clock()  # the store's clock: the conversations' timestamps
        keys = sql.padded(list(dict.fromkeys(append.conversation_key for append in appends)))
        rows = conn.execute(sql.versions_and_counts(len(keys)), keys).fetchall()
        conversations = {key: _Held(version, count, json.loads(held)) for key, version, count, held in rows}
        pairs = list(dict.fromkeys((a.conversation_key, a.idempotency.key) for a in appends if a.idempotency))
        records: dict[tuple[str, str], Recorded] = {}  # the live ones
        if pairs:
            pairs = sql.padded(pairs)
            found = conn.execute(sql.live_records(len(pairs)), [*itertools.chain(*pairs), now]).fetchall()
            records = {(key, record): Recorded(fingerprint, version) for key, record, fingerprint, version in found}
        outcomes: list[Outcome] = []
        messages: list[tuple[str, int, bytes]] = []
        changed: dict[str, _Held] = {}
        new_records: list[tuple[str, str, str, str, float]] = []
        for key, batch, if_match, idempotency, authors in appends:
            version, count, participants = conversations.get(key, _Held(ABSENT, 0, {}))
            recorded = None if idempotency is None else records.get((key, idempotency.key))
            decision = decide_append(
                version, count, len(batch), if_match=if_match, idempotency=idempotency, recorded=recorded
            )
            if decision.writes_messages:
                messages += ((key, position, body) for position, body in enumerate(batch, count))
                held = _Held(decision.version, decision.count, added(participants, authors))
                conversations[key] = changed[key] = held
            if decision.record is not None and idempotency is not None:
                records[key, idempotency.key] = decision.record
                record = (key, idempotency.key, decision.record.fingerprint, decision.record.version)
                new_records.append((*record, now + idempotency.ttl))
            outcomes.append(_outcome(decision))
        conn.executemany(
            sql.UPSERT_CONVERSATION,
            [(k, n, v, written, written, json_object(p)) for k, (v, n, p) in changed.items()],
        )
        conn.executemany(sql.INSERT_MESSAGE, messages)
        if new_records:
            if now >= self._next_expiry:
                conn.execute(sql.DELETE_EXPIRED_RECORDS, (now,))
                self._next_expiry = now + EXPIRY_INTERVAL
            conn.executemany(sql.PUT_RECORD, new_records)
        return outcomes


def _outcome(decision: AppendDecision) -> Outcome:
    """A decision as the writer answers it: the result, or the refusal to raise."""
    if isinstance(decision.answer, WriteResult):
        return (decision.answer, None)
    return (None, decision.answer)


def replace(
    conn: sqlite3.Connection, conversation_key: str, messages: list[bytes], if_match: Collection[str] | None, now: float
) -> WriteResult:
    """Make the conversation hold exactly ``messages`` at a new generation, over ``if_match``."""
    check(conn, conversation_key, if_match)
    version = new_version(len(messages))
    participants = json_object(count_authors(messages))
    conn.execute(sql.UPSERT_CONVERSATION, (conversation_key, len(messages), version, now, now, participants))
    conn.execute(sql.DELETE_MESSAGES, (conversation_key,))
    conn.executemany(sql.INSERT_MESSAGE, [(conversation_key, i, m) for i, m in enumerate(messages)])
    return WriteResult(version)


def delete(conn: sqlite3.Connection, conversation_key: str, if_match: Collection[str] | None) -> None:
    """Forget the conversation (its messages and metadata), over ``if_match``."""
    check(conn, conversation_key, if_match)
    conn.execute(sql.DELETE_CONVERSATION, (conversation_key,))
    conn.execute(sql.DELETE_MESSAGES, (conversation_key,))


def restore(conn: sqlite3.Connection, records: Sequence[ConversationRecord]) -> None:
    """Write each record whole, each over its expected version (and metadata, when given)."""
    for record in records:
        key = record.conversation_key
        check(conn, key, [record.expected])
        if record.expected_metadata is not None:
            check_metadata(conn, key, record.expected_metadata)
        conn.execute(sql.DELETE_MESSAGES, (key,))
        row = (key, len(record.messages), record.version, record.created_at, record.updated_at, record.title)
        participants = json_object(count_authors(record.messages))
        conn.execute(sql.PUT_CONVERSATION, (*row, json_object(record.tags), participants))
        conn.executemany(sql.INSERT_MESSAGE, [(key, i, bytes(m)) for i, m in enumerate(record.messages)])


def check_metadata(conn: sqlite3.Connection, conversation_key: str, expected: Metadata) -> None:
    """Raise :class:`MetadataChanged` unless the conversation carries ``expected`` (an absent one carries none)."""
    row = conn.execute(sql.SUMMARY, (conversation_key,)).fetchone()
    if row is None:
        expected.check(None, {})
    else:
        held = summary(row)
        expected.check(held.title, held.tags)


def set_metadata(
    conn: sqlite3.Connection,
    conversation_key: str,
    change: MetadataChange,
    expected: Metadata | None,
    if_match: Collection[str] | None,
) -> ConversationSummary | None:
    """Make ``change`` over ``if_match`` and ``expected`` (when given); the summary after, ``None`` if there is no
    such conversation."""
    check(conn, conversation_key, if_match)
    row = conn.execute(sql.SUMMARY, (conversation_key,)).fetchone()
    if row is None:
        return None
    before = summary(row)
    if expected is not None:
        expected.check(before.title, before.tags)
    title, tags = change.applied(before.title, before.tags)
    conn.execute(sql.SET_METADATA, (title, json_object(tags), conversation_key))
    return replace_fields(before, title=title, tags=tags)


def sweep(conn: sqlite3.Connection, cutoff: float) -> int:
    """Delete every conversation last written at or before ``cutoff`` (found by the ``updated_at`` index)."""
    conn.execute(sql.DELETE_DUE_MESSAGES, (cutoff,))
    return int(conn.execute(sql.DELETE_DUE_CONVERSATIONS, (cutoff,)).rowcount)
