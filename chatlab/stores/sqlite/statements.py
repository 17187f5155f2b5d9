"""The SQL the SQLite store runs (the tables are in :mod:`.schema`). Values are parameters, so ``sqlite3`` keeps
each statement prepared; those over several keys take a power-of-two number of them, so that few texts exist."""

from __future__ import annotations

import functools
from typing import TypeVar

from ...vocabulary import NAMESPACE_SEPARATOR

T = TypeVar("T")

COUNT_AND_VERSION = "SELECT message_count, version FROM chatlab_conversations WHERE conversation_key = ?"
MESSAGES_FROM = (
    "SELECT body FROM chatlab_messages WHERE conversation_key = ? AND position >= ? ORDER BY position LIMIT ?"
)
ARRAY = (
    "SELECT version, message_count, CAST(coalesce((SELECT '[' || group_concat(body, ',') || ']' FROM (SELECT body "
    "FROM chatlab_messages WHERE conversation_key = ?1 ORDER BY position)), '[]') AS BLOB) "
    "FROM chatlab_conversations WHERE conversation_key = ?1"
)
"""A conversation's version, count and messages as one JSON array, joined byte for byte in position order (the
subquery's ``ORDER BY`` holds: an aggregate's subquery is not flattened)."""
_SUMMARY_COLUMNS = "conversation_key, message_count, version, created_at, updated_at, title, tags, participants"
PLAIN = f"instr(conversation_key, '{NAMESPACE_SEPARATOR}') = 0"
"""Keys outside every namespace: the condition of the partial index ``chatlab_conversations_plain`` (:mod:`.schema`),
which a query repeats word for word so that SQLite reads the index."""


@functools.cache
def summaries(below: bool, plain: bool) -> str:
    """A page of summaries: keys from ``?1`` on but ``?2`` (``after``, or NULL), below ``?3`` if ``below`` (the end
    of a prefix's range), with every tag of the JSON object ``?4`` (NULL: any), at most ``?5`` (-1: all). A range of
    the primary key in code point order, or (``plain``) of the plain keys' index: a page reads only its rows."""
    upper = " AND conversation_key < ?3" if below else ""
    index = f" INDEXED BY chatlab_conversations_plain WHERE {PLAIN} AND" if plain else " WHERE"
    return (
        f"SELECT {_SUMMARY_COLUMNS} FROM chatlab_conversations AS c{index} conversation_key >= ?1 AND "
        f"conversation_key IS NOT ?2{upper} AND NOT EXISTS (SELECT 1 FROM json_each(?4) AS w WHERE w.value IS NOT "
        "(SELECT t.value FROM json_each(c.tags) AS t WHERE t.key = w.key)) ORDER BY conversation_key LIMIT ?5"
    )


UPSERT_CONVERSATION = (
    "INSERT INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at, "
    "participants) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_key) DO UPDATE SET "
    "message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at, "
    "participants = excluded.participants"
)
"""A conversation's count, version, times and participants (a JSON object, decided in Python like the rest)."""
PUT_CONVERSATION = (
    "INSERT OR REPLACE INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at, "
    "title, tags, participants) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SUMMARY = f"SELECT {_SUMMARY_COLUMNS} FROM chatlab_conversations WHERE conversation_key = ?"
SET_METADATA = "UPDATE chatlab_conversations SET title = ?, tags = ? WHERE conversation_key = ?"
INSERT_MESSAGE = "INSERT INTO chatlab_messages (conversation_key, position, body) VALUES (?, ?, ?)"
DELETE_MESSAGES = "DELETE FROM chatlab_messages WHERE conversation_key = ?"
DELETE_CONVERSATION = "DELETE FROM chatlab_conversations WHERE conversation_key = ?"
PUT_RECORD = (
    "INSERT OR REPLACE INTO chatlab_idempotency (conversation_key, idempotency_key, fingerprint, version, expires_at) "
    "VALUES (?, ?, ?, ?, ?)"
)
DELETE_EXPIRED_RECORDS = "DELETE FROM chatlab_idempotency WHERE expires_at <= ?"
DUE = "SELECT conversation_key FROM chatlab_conversations WHERE updated_at <= ?"
DELETE_DUE_MESSAGES = f"DELETE FROM chatlab_messages WHERE conversation_key IN ({DUE})"
DELETE_DUE_CONVERSATIONS = "DELETE FROM chatlab_conversations WHERE updated_at <= ?"


@functools.cache
def versions_and_counts(keys: int) -> str:
    """The version, count and participants of up to ``keys`` conversations (absent ones give no row)."""
    return (
        "SELECT conversation_key, version, message_count, participants FROM chatlab_conversations "
        f"WHERE conversation_key IN ({','.join('?' * keys)})"
    )


@functools.cache
def live_records(pairs: int) -> str:
    """The live idempotency records of up to ``pairs`` (conversation, key) pairs, then the time they must outlive
    (a join: each pair is a search of the unique index)."""
    values = ",".join(["(?,?)"] * pairs)
    return (
        f"WITH wanted (k, i) AS (VALUES {values}) SELECT r.conversation_key, r.idempotency_key, r.fingerprint, "
        "r.version FROM wanted JOIN chatlab_idempotency AS r ON r.conversation_key = wanted.k "
        "AND r.idempotency_key = wanted.i WHERE r.expires_at > ?"
    )


def padded(items: list[T]) -> list[T]:
    """``items`` (at least one) padded to a power-of-two length by repeating the last."""
    size = 1 << (len(items) - 1).bit_length()
    return items + items[-1:] * (size - len(items))
