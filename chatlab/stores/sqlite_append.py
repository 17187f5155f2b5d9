"""The appends of one group commit as a few set-based statements, whatever the number of appends.

Each statement the writer thread runs costs a call into ``sqlite3``, a step and a hand-off of the GIL (which the
service's event loop may hold): per append that was four statements. Here the appends queued together (in the
writer thread, inside the group's transaction) cost one read of every record, version and count they need, then
one upsert of the conversations, one insert of all their messages and one of their idempotency records. Between
the read and the writes, each append is checked in queue order against what the appends before it wrote (its
conversation's count and version, the records they made), as if each had run alone: a refused append writes no
row, and each caller gets its own answer.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .base import (
    ABSENT,
    Idempotency,
    IdempotencyKeyReused,
    VersionMismatch,
    WriteResult,
    appended_version,
    version_matches,
)

Request = tuple[str, list[bytes], Collection[str] | None, Idempotency | None]
"""One append: conversation key, messages, ``If-Match`` versions (``None``: no condition), idempotency."""
Outcome = tuple[WriteResult | None, BaseException | None]


@functools.cache
def _state_query(pairs: int) -> str:
    """The live record, version and count for ``pairs`` (conversation, idempotency key) pairs, as one JSON array
    (one row: one step)."""
    values = ",".join(["(?,?)"] * pairs)
    return (
        f"WITH q(k, i) AS (VALUES {values}) SELECT json_group_array(json_array(q.k, q.i, r.fingerprint, r.version, "
        "c.version, c.message_count)) FROM q "
        "LEFT JOIN chatlab_idempotency AS r ON r.conversation_key = q.k AND r.idempotency_key = q.i "
        "AND r.expires_at > ? LEFT JOIN chatlab_conversations AS c ON c.conversation_key = q.k"
    )


UPSERT = (
    "INSERT INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_key) DO UPDATE SET message_count = excluded.message_count, "
    "version = excluded.version, updated_at = excluded.updated_at"
)
MESSAGES = "INSERT INTO chatlab_messages (conversation_key, position, body) VALUES (?, ?, ?)"
RECORDS = (
    "INSERT OR REPLACE INTO chatlab_idempotency (conversation_key, idempotency_key, fingerprint, version, expires_at) "
    "VALUES (?, ?, ?, ?, ?)"
)


def _read_state(
    conn: sqlite3.Connection, requests: Sequence[Request], now: float
) -> tuple[dict[str, tuple[str, int]], dict[tuple[str, str], tuple[str, str]]]:
    """Every conversation's (version, count) and every live record's (fingerprint, version) the appends need."""
    pairs = list(dict.fromkeys((key, None if idem is None else idem.key) for key, _, _, idem in requests))
    size = 1 << (len(pairs) - 1).bit_length()  # a power of two (the last pair repeated): few statement texts
    params: list[object] = []
    for key, record in pairs + pairs[-1:] * (size - len(pairs)):
        params += (key, record)
    params.append(now)
    conversations: dict[str, tuple[str, int]] = {}
    records: dict[tuple[str, str], tuple[str, str]] = {}
    for key, record, fingerprint, recorded, version, count in json.loads(
        conn.execute(_state_query(size), params).fetchone()[0]
    ):
        conversations[key] = (ABSENT, 0) if version is None else (version, count)
        if fingerprint is not None:
            records[key, record] = (fingerprint, recorded)
    return conversations, records


def append_group(
    conn: sqlite3.Connection,
    requests: Sequence[Request],
    now: float,
    written: float,
    expire: Callable[[], Any],
    learn: Callable[[dict[str, tuple[str, int]]], Any] = lambda states: None,
) -> list[Outcome]:
    """Check and write ``requests`` in order (``now``: the time records expire against; ``written``: the
    conversations' timestamp; ``expire`` deletes expired records before new ones are written; ``learn`` is
    given each existing conversation's state after the group, :mod:`.sqlite_one_step`'s hints)."""
    conversations, records = _read_state(conn, requests, now)
    outcomes: list[Outcome] = []
    rows: list[tuple[str, int, bytes]] = []
    changed: dict[str, tuple[str, int]] = {}
    new_records: list[tuple[str, str, str, str, float]] = []
    for key, batch, if_match, idempotency in requests:
        if idempotency is not None and (record := records.get((key, idempotency.key))) is not None:
            if record[0] != idempotency.fingerprint:
                outcomes.append((None, IdempotencyKeyReused(idempotency.key)))
            else:
                outcomes.append((WriteResult(record[1], replayed=True), None))
            continue
        version, count = conversations[key]
        if not version_matches(version, if_match):
            outcomes.append((None, VersionMismatch(version)))
            continue
        if batch:
            version = appended_version(version, count + len(batch))
            for position, body in enumerate(batch, count):
                rows.append((key, position, body))
            conversations[key] = changed[key] = (version, count + len(batch))
        if idempotency is not None:
            records[key, idempotency.key] = (idempotency.fingerprint, version)
            new_records.append((key, idempotency.key, idempotency.fingerprint, version, now + idempotency.ttl))
        outcomes.append((WriteResult(version), None))
    # executemany: one call, and no statement text per size (a VALUES list of 64 rows cost SQLite 2x 16 of 4 rows)
    conn.executemany(UPSERT, [(key, count, version, written, written) for key, (version, count) in changed.items()])
    conn.executemany(MESSAGES, rows)
    if new_records:
        expire()
        conn.executemany(RECORDS, new_records)
    learn({key: state for key, state in conversations.items() if state[0] != ABSENT})
    return outcomes
