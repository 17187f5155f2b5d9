"""The SQL the SQLite store runs, in one place (the tables are in :mod:`.schema`).

Every statement takes its values as parameters, so ``sqlite3`` keeps each one prepared in its connection's
statement cache. Statements over a variable number of keys are written for a power-of-two number of them (the
last key repeated), so that only a few texts are ever prepared.
"""

from __future__ import annotations

import functools
from typing import TypeVar

T = TypeVar("T")

# -- reads --------------------------------------------------------------------------

VERSION = "SELECT version FROM chatlab_conversations WHERE conversation_key = ?"
MESSAGES = "SELECT body FROM chatlab_messages WHERE conversation_key = ? ORDER BY position"
COUNT_AND_VERSION = "SELECT message_count, version FROM chatlab_conversations WHERE conversation_key = ?"
MESSAGES_FROM = (
    "SELECT body FROM chatlab_messages WHERE conversation_key = ? AND position >= ? ORDER BY position LIMIT ?"
)
ARRAY = (
    "SELECT version, message_count, CAST(coalesce((SELECT '[' || group_concat(body, ',') || ']' FROM (SELECT body "
    "FROM chatlab_messages WHERE conversation_key = ?1 ORDER BY position)), '[]') AS BLOB) "
    "FROM chatlab_conversations WHERE conversation_key = ?1"
)
"""A conversation's version, count and messages as one JSON array. The subquery's ``ORDER BY`` keeps the
positions' order (an aggregate's subquery is not flattened); bodies are UTF-8, joined byte for byte."""
_PAGE = (
    "SELECT conversation_key, message_count, version, created_at, updated_at, title, tags FROM chatlab_conversations "
    "AS c WHERE conversation_key >= ?1 AND conversation_key IS NOT ?2{below} AND NOT EXISTS (SELECT 1 FROM "
    "json_each(?4) AS w WHERE w.value IS NOT (SELECT t.value FROM json_each(c.tags) AS t WHERE t.key = w.key)) "
    "ORDER BY conversation_key LIMIT ?5"
)
SUMMARIES = _PAGE.format(below="")
"""A page of summaries: keys from ``?1`` on, except ``?2`` (the page's ``after``, or NULL), each carrying every tag
of the JSON object ``?4`` (NULL: no filter), at most ``?5`` (-1: all). A range of the primary key in its order (TEXT
compares bytewise: code point order), so a page reads only its rows however many conversations there are."""
SUMMARIES_BELOW = _PAGE.format(below=" AND conversation_key < ?3")
""":data:`SUMMARIES` with the keys below ``?3`` (the end of a prefix's range) only."""

# -- writes -------------------------------------------------------------------------

VERSION_AND_COUNT = "SELECT version, message_count FROM chatlab_conversations WHERE conversation_key = ?"
UPSERT_CONVERSATION = (
    "INSERT INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_key) DO UPDATE SET message_count = excluded.message_count, "
    "version = excluded.version, updated_at = excluded.updated_at"
)
"""A new conversation gets both times; an existing one keeps ``created_at``."""
PUT_CONVERSATION = (
    "INSERT OR REPLACE INTO chatlab_conversations (conversation_key, message_count, version, created_at, updated_at, "
    "title, tags) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
"""A conversation with its own times and metadata (a migration's restore)."""
SUMMARY = (
    "SELECT conversation_key, message_count, version, created_at, updated_at, title, tags FROM chatlab_conversations "
    "WHERE conversation_key = ?"
)
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
    """The version and count of up to ``keys`` conversations (absent ones give no row)."""
    return (
        "SELECT conversation_key, version, message_count FROM chatlab_conversations "
        f"WHERE conversation_key IN ({','.join('?' * keys)})"
    )


@functools.cache
def live_records(pairs: int) -> str:
    """The live idempotency records of up to ``pairs`` (conversation, key) pairs, then the time they must outlive
    (a join, so that each pair is a search of the records' unique index)."""
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
