"""The PostgreSQL store's tables and append functions: created on first use, or upgraded in place from schema
versions 1 and 2 (the functions are added to a version 3 schema that lacks them).

The statements are in :mod:`chatlab.stores.postgres_sql`; this is when and how they run, among processes
that may start together.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .base import StoreError
from .postgres_append_sql import APPEND_BATCH_FUNCTION
from .postgres_sql import APPEND_FUNCTION

if TYPE_CHECKING:
    from .postgres import PostgresChatHistoryStore

SCHEMA_VERSION = 3

log = logging.getLogger(__name__)


async def ensure_schema(store: PostgresChatHistoryStore, conn: Any) -> None:
    """Create the store's schema and tables if missing, or upgrade versions 1 and 2 in place, once per store."""
    if store._schema_ready:
        return
    q = store._queries
    async with conn.transaction():
        # DDL only when the tables are missing: a role with no CREATE right can use a
        # schema that someone else created.
        if not await _tables_exist(store, conn):
            # Serialize creation among processes starting together (CREATE ... IF NOT
            # EXISTS alone can still collide on the catalog's unique indexes), and look again
            # after the wait: DDL on tables already in use could deadlock with their writers.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chatlab-schema:{store.schema}",))
            if not await _tables_exist(store, conn):
                await _create(store, conn)
        row = await (await conn.execute(q["version_get"])).fetchone()
        if row is not None and int(row[0]) in (1, 2):
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chatlab-schema:{store.schema}",))
            row = await (await conn.execute(q["version_get"])).fetchone()
            if row is not None and int(row[0]) in (1, 2):  # not upgraded by another process meanwhile
                for statement in q[f"upgrade_from_{int(row[0])}"]:
                    await conn.execute(statement, {"now": store.clock()})
                row = await (await conn.execute(q["version_get"])).fetchone()
    if row is None or int(row[0]) != SCHEMA_VERSION:
        raise StoreError(
            f"PostgreSQL store {store.where} schema {store.schema} has schema version {row and row[0]}; "
            f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 and 2) only"
        )
    await _ensure_function(store, conn, APPEND_FUNCTION, "create_append_function")  # a single append's
    import psycopg

    try:
        await _ensure_function(store, conn, APPEND_BATCH_FUNCTION, "create_append_batch_function")
    except psycopg.errors.InsufficientPrivilege as exc:  # a role that may use the schema, not create in it
        log.warning(
            "PostgreSQL schema %s has no %s and this role may not create it (%s): appends run one at a "
            "time through %s; run chatlab once with a role that may",
            store.schema,
            APPEND_BATCH_FUNCTION,
            exc,
            APPEND_FUNCTION,
        )
        store._append_batch = False
    store._schema_ready = True


async def _ensure_function(store: PostgresChatHistoryStore, conn: Any, name: str, create: str) -> None:
    """Create an append function where it is missing (a schema that an older chatlab created): the tables
    stay as they are, so older chatlab processes can still share the database."""
    q = store._queries

    async def exists() -> bool:
        cur = await conn.execute(q["append_function_exists"], (store.schema, name))
        return await cur.fetchone() is not None

    if await exists():
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chatlab-schema:{store.schema}",))
        if not await exists():
            await conn.execute(q[create])


async def _tables_exist(store: PostgresChatHistoryStore, conn: Any) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = 'chatlab_meta'", (store.schema,)
    )
    return await cur.fetchone() is not None


async def _create(store: PostgresChatHistoryStore, conn: Any) -> None:
    q = store._queries
    cur = await conn.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (store.schema,))
    if await cur.fetchone() is None:
        await conn.execute(q["create_schema"])
    for statement in q["create"]:
        await conn.execute(statement, {"now": store.clock()})
    await conn.execute(q["version_set"], (str(SCHEMA_VERSION),))
