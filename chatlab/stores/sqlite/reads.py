"""What each read of the SQLite store does on a reader thread's connection.

A read that needs more than one statement runs them in one transaction (``BEGIN`` ... ``ROLLBACK``), so the
messages, the count and the version come from one snapshot and always agree (WAL: a writer does not block it).
"""

from __future__ import annotations

import sqlite3

from ..base import ABSENT, Conversation, ConversationArray, ConversationSlice, ConversationSummary, prefix_upper_bound
from . import statements as sql
from .schema import rollback

EMPTY_ARRAY = ConversationArray(b"[]", 0, ABSENT)


def read(conn: sqlite3.Connection, conversation_key: str) -> Conversation:
    conn.execute("BEGIN")
    try:
        row = conn.execute(sql.VERSION, (conversation_key,)).fetchone()
        rows = conn.execute(sql.MESSAGES, (conversation_key,)).fetchall()
    finally:
        rollback(conn)
    return Conversation([bytes(r[0]) for r in rows], row[0] if row is not None else ABSENT)


def read_array(conn: sqlite3.Connection, conversation_key: str) -> ConversationArray:
    """One statement (its own snapshot) joins the array in SQLite: Python handles one value, not one per message."""
    row = conn.execute(sql.ARRAY, (conversation_key,)).fetchone()
    return ConversationArray(row[2], row[1], row[0]) if row is not None else EMPTY_ARRAY


def read_slice(conn: sqlite3.Connection, conversation_key: str, after: int, limit: int | None) -> ConversationSlice:
    """A range of the (conversation, position) index: what is new costs what is new, not the whole history."""
    conn.execute("BEGIN")
    try:
        row = conn.execute(sql.COUNT_AND_VERSION, (conversation_key,)).fetchone()
        rows = []
        if row is not None and limit != 0 and after < row[0]:
            rows = conn.execute(sql.MESSAGES_FROM, (conversation_key, after, -1 if limit is None else limit)).fetchall()
    finally:
        rollback(conn)
    if row is None:
        return ConversationSlice([], after, 0, ABSENT)
    return ConversationSlice([bytes(r[0]) for r in rows], after, row[0], row[1])


def summaries(conn: sqlite3.Connection, prefix: str) -> list[ConversationSummary]:
    """The conversations whose key starts with ``prefix``, as a range of the primary key, ordered by key."""
    query = sql.SUMMARIES
    params: list[str] = []
    if prefix:
        query += " WHERE conversation_key >= ?"
        params.append(prefix)
        upper = prefix_upper_bound(prefix)
        if upper is not None:
            query += " AND conversation_key < ?"
            params.append(upper)
    rows = conn.execute(query + " ORDER BY conversation_key", params).fetchall()
    return [ConversationSummary(*row) for row in rows]
