"""What each read of the SQLite store does on a reader thread's connection. A read of several statements runs them
in one transaction, so that the messages, the count and the version agree (WAL: a writer does not block it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ..base import (
    ABSENT,
    ConversationArray,
    ConversationSlice,
    ConversationSummary,
    listing_start,
    prefix_upper_bound,
)
from . import statements as sql
from .schema import rollback


def read_array(conn: sqlite3.Connection, conversation_key: str) -> ConversationArray:
    """One statement joins the array in SQLite: Python handles one value, not one per message."""
    row = conn.execute(sql.ARRAY, (conversation_key,)).fetchone()
    return ConversationArray(row[2], row[1], row[0]) if row is not None else ConversationArray(b"[]", 0, ABSENT)


def read_slice(conn: sqlite3.Connection, conversation_key: str, after: int, limit: int | None) -> ConversationSlice:
    """A range of the (conversation, position) index: what is new costs what is new."""
    conn.execute("BEGIN")
    try:
        row = conn.execute(sql.COUNT_AND_VERSION, (conversation_key,)).fetchone()
        rows = []
        if row is not None and limit != 0 and after < row[0]:
            rows = conn.execute(sql.MESSAGES_FROM, (conversation_key, after, -1 if limit is None else limit)).fetchall()
    finally:
        rollback(conn)
    count, version = row if row is not None else (0, ABSENT)
    return ConversationSlice([bytes(r[0]) for r in rows], after, count, version)


def summaries(
    conn: sqlite3.Connection,
    prefix: str,
    after: str | None,
    limit: int | None,
    tags: Mapping[str, str] | None,
    plain: bool,
) -> list[ConversationSummary]:
    """A page of the listing (:meth:`~chatlab.stores.base.ChatHistoryStore.summaries`), one range of the key index
    (``plain``: of the plain keys' index)."""
    start, inclusive = listing_start(prefix, after)
    skip = None if inclusive else start
    wanted = json.dumps(dict(tags)) if tags else None
    upper = prefix_upper_bound(prefix)
    params = (start, skip, upper, wanted, -1 if limit is None else limit)
    return [summary(row) for row in conn.execute(sql.summaries(upper is not None, plain), params)]


def summary(row: tuple[Any, ...]) -> ConversationSummary:
    """A conversation's summary from its row (:data:`.statements.SUMMARY`'s columns)."""
    key, count, version, created_at, updated_at, title, tags, participants = row
    return ConversationSummary(
        key, count, version, created_at, updated_at, title, json.loads(tags), json.loads(participants)
    )
