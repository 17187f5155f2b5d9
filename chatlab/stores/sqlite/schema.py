"""The SQLite store's tables: created on first use, or upgraded in place from schema versions 1, 2 and 3.

Version 2 added versions and idempotency records, version 3 the timestamps (``created_at``, ``updated_at``,
the latter indexed for retention), version 4 the metadata (``title``, and ``tags`` as a JSON object). Creation and
upgrade are one ``BEGIN IMMEDIATE`` transaction: processes opening the file together wait for each other, and a
failed upgrade leaves the file as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..base import StoreError, new_version

SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE IF NOT EXISTS chatlab_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chatlab_conversations (
    conversation_key TEXT PRIMARY KEY,
    message_count    INTEGER NOT NULL,
    version          TEXT,
    created_at       REAL,
    updated_at       REAL,
    title            TEXT,
    tags             TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS chatlab_idempotency_expiry ON chatlab_idempotency (expires_at);
"""

WRITTEN_ORDER = {
    "chatlab_messages": (
        "CREATE TABLE chatlab_messages (conversation_key TEXT NOT NULL, position INTEGER NOT NULL, body BLOB NOT NULL)",
        "CREATE UNIQUE INDEX chatlab_messages_position ON chatlab_messages (conversation_key, position)",
    ),
    "chatlab_idempotency": (
        "CREATE TABLE chatlab_idempotency (conversation_key TEXT NOT NULL, idempotency_key TEXT NOT NULL, "
        "fingerprint TEXT NOT NULL, version TEXT NOT NULL, expires_at REAL NOT NULL)",
        "CREATE UNIQUE INDEX chatlab_idempotency_key ON chatlab_idempotency (conversation_key, idempotency_key)",
    ),
}
"""Messages and idempotency records in the order they were written (rowid tables), found by unique indexes on
(conversation, position) and (conversation, key). A group commit's rows then fill the tables' last pages, and only
the small index entries go to each conversation's place, where tables ordered by conversation (``WITHOUT ROWID``
with those primary keys, as older files have them) split pages across the tree. Older files keep their layout,
which the same statements read and write alike: no upgrade, no copy."""

TIMESTAMPS = "CREATE INDEX IF NOT EXISTS chatlab_conversations_updated ON chatlab_conversations (updated_at)"
"""Schema version 3: when each conversation was created and last written (the index serves retention)."""


def rollback(conn: sqlite3.Connection) -> None:
    """End the transaction, if SQLite has not ended it already (it may have, after disk full or an I/O error)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def ensure_schema(conn: sqlite3.Connection, now: float, path: Path) -> None:
    """Create the tables if missing, or upgrade versions 1 to 3 in place (``now``: the upgraded conversations'
    times), in one transaction; a file of another version is refused."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # not executescript(), which would COMMIT first: one statement at a time
        for table, statements in WRITTEN_ORDER.items():  # new tables in written order (old ones stay as they are)
            if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (table,)).fetchone() is None:
                for statement in statements:
                    conn.execute(statement)
        for statement in filter(None, (s.strip() for s in SCHEMA.split(";"))):
            conn.execute(statement)
        row = conn.execute("SELECT value FROM chatlab_meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO chatlab_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) in (1, 2, 3):
            if int(row[0]) == 1:
                _upgrade_from_1(conn)
            if int(row[0]) <= 2:
                _upgrade_from_2(conn, now)
            _upgrade_from_3(conn)
            conn.execute("UPDATE chatlab_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"SQLite store {path} has schema version {row[0]}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 to 3) only"
            )
        conn.execute(TIMESTAMPS)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def _upgrade_from_1(conn: sqlite3.Connection) -> None:
    """Version 1 had no versions: give each conversation one (the idempotency table is new)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")}
    if "version" not in columns:
        conn.execute("ALTER TABLE chatlab_conversations ADD COLUMN version TEXT")
    rows = conn.execute(
        "SELECT conversation_key, message_count FROM chatlab_conversations WHERE version IS NULL"
    ).fetchall()
    conn.executemany(
        "UPDATE chatlab_conversations SET version = ? WHERE conversation_key = ?",
        [(new_version(count), key) for key, count in rows],
    )


def _upgrade_from_2(conn: sqlite3.Connection, now: float) -> None:
    """Version 2 had no timestamps: each conversation gets the upgrade's time as both."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")}
    for column in ("created_at", "updated_at"):
        if column not in columns:
            conn.execute(f"ALTER TABLE chatlab_conversations ADD COLUMN {column} REAL")
    conn.execute(
        "UPDATE chatlab_conversations SET created_at = coalesce(created_at, ?), updated_at = coalesce(updated_at, ?)",
        (now, now),
    )


def _upgrade_from_3(conn: sqlite3.Connection) -> None:
    """Version 3 had no metadata: each conversation gets no title and no tags (``ADD COLUMN`` copies no row)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")}
    if "title" not in columns:
        conn.execute("ALTER TABLE chatlab_conversations ADD COLUMN title TEXT")
    if "tags" not in columns:
        conn.execute("ALTER TABLE chatlab_conversations ADD COLUMN tags TEXT NOT NULL DEFAULT '{}'")
