"""The SQLite store's tables, created on first use or upgraded in place from versions 1 to 4 (2 added versions and
idempotency records, 3 timestamps, 4 title and tags, 5 participants), in one ``BEGIN IMMEDIATE`` transaction:
processes opening the file together wait for each other, and a failed upgrade changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...authors import count_authors
from ..base import StoreError, json_object, new_version
from .statements import PLAIN

SCHEMA_VERSION = 5
UPGRADED = (1, 2, 3, 4)  # the older versions upgraded in place

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
    tags             TEXT NOT NULL DEFAULT '{}',
    participants     TEXT NOT NULL DEFAULT '{}'
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
"""New tables keep rows in written order (rowid tables, unique indexes): a group commit fills their last pages and
adds small index entries. Older files keep their ``WITHOUT ROWID`` tables, used alike: no upgrade, no copy."""

ADDED_COLUMNS = (
    "version TEXT",
    "created_at REAL",
    "updated_at REAL",
    "title TEXT",
    "tags TEXT NOT NULL DEFAULT '{}'",
    "participants TEXT NOT NULL DEFAULT '{}'",
)
"""The columns of ``chatlab_conversations`` that versions 1 to 4 lack (some of them), in the order they came."""


PLAIN_INDEX = (
    f"CREATE INDEX IF NOT EXISTS chatlab_conversations_plain ON chatlab_conversations (conversation_key) WHERE {PLAIN}"
)
"""The keys outside every namespace, in key order: a keyless service's page reads them alone, however many namespaced
conversations lie between them."""


def rollback(conn: sqlite3.Connection) -> None:
    """End the transaction, if SQLite has not ended it already (it may have, after disk full or an I/O error)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def ensure_schema(conn: sqlite3.Connection, now: float, path: Path) -> None:
    """Create the tables if missing, or upgrade versions 1 to 4 (``now``: the upgraded conversations' times)."""
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
        elif int(row[0]) in UPGRADED:
            _upgrade(conn, int(row[0]), now)
            conn.execute("UPDATE chatlab_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"SQLite store {path} has schema version {row[0]}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 to 4) only"
            )
        # the index of retention, once ``updated_at`` exists
        conn.execute("CREATE INDEX IF NOT EXISTS chatlab_conversations_updated ON chatlab_conversations (updated_at)")
        conn.execute(PLAIN_INDEX)  # built once in a file written before it (SQLite then keeps it with every write)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def _upgrade(conn: sqlite3.Connection, version: int, now: float) -> None:
    """Add the missing :data:`ADDED_COLUMNS` (``ADD COLUMN`` copies no row), a version to each conversation of
    version 1, the upgrade's time as both timestamps to those of versions 1 and 2, and to every conversation the
    participants counted from its messages."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")}
    for column in ADDED_COLUMNS:
        if column.split()[0] not in present:
            conn.execute(f"ALTER TABLE chatlab_conversations ADD COLUMN {column}")
    if version == 1:
        rows = conn.execute("SELECT conversation_key, message_count FROM chatlab_conversations WHERE version IS NULL")
        conn.executemany(
            "UPDATE chatlab_conversations SET version = ? WHERE conversation_key = ?",
            [(new_version(count), key) for key, count in rows.fetchall()],
        )
    if version <= 2:
        conn.execute(
            "UPDATE chatlab_conversations SET created_at = coalesce(created_at, ?1), "
            "updated_at = coalesce(updated_at, ?1)",
            (now,),
        )
    _count_participants(conn)


def _count_participants(conn: sqlite3.Connection) -> None:
    """Count each conversation's authors from its stored messages, as appends count them from now on."""
    keys = [row[0] for row in conn.execute("SELECT conversation_key FROM chatlab_conversations")]
    for key in keys:
        bodies = conn.execute("SELECT body FROM chatlab_messages WHERE conversation_key = ? ORDER BY position", (key,))
        counts = count_authors(bytes(row[0]) for row in bodies)
        conn.execute(
            "UPDATE chatlab_conversations SET participants = ? WHERE conversation_key = ?", (json_object(counts), key)
        )
