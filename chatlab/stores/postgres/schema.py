"""The creation or in-place upgrade (from versions 1 to 4) of the tables, the append function and the plain keys'
index, by processes that may start together: under an advisory lock on the schema's name, looking again after the
wait, and only where something is missing (a role with no ``CREATE`` right can use a schema someone else made). A
missing append function or index (an older chatlab's schema) is created beside the tables, left as they are, so older
processes can share them."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ...authors import author_of
from ..base import StoreError, json_object
from . import appends
from .statements import PLAIN_INDEX, SCHEMA_VERSION, Statements

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

log = logging.getLogger(__name__)


@dataclass
class Schema:
    """Makes one store's schema ready, once (:meth:`ensure` on a connection before its first use)."""

    statements: Statements
    where: str
    clock: Callable[[], float]
    ready: bool = False
    appends_refused: str | None = None  # why: the append function is missing and this role may not create it

    async def ensure(self, conn: PoolConnectionProxy) -> None:
        """Create or upgrade the tables and the append function unless done (a :class:`StoreError` if the tables'
        version is unknown)."""
        if self.ready:
            return
        import asyncpg

        q = self.statements
        lock = partial(conn.execute, "SELECT pg_advisory_xact_lock(hashtext($1))", f"chatlab-schema:{q.schema}")
        async with conn.transaction():
            if not await conn.fetchval(q.tables_exist, q.schema):
                # IF NOT EXISTS alone can collide on the catalog; DDL could deadlock with writers: look again locked
                await lock()
                if not await conn.fetchval(q.tables_exist, q.schema):
                    if not await conn.fetchval(q.schema_exists, q.schema):
                        await conn.execute(q.create_schema)
                    for sql in q.create:
                        await conn.execute(sql)
            version = await conn.fetchval(q.version_get)
            if version is not None and int(version) in q.upgrades:
                await lock()
                version = await conn.fetchval(q.version_get)
                if version is not None and int(version) in q.upgrades:  # not upgraded by another process
                    for sql in q.upgrades[int(version)]:
                        await conn.execute(sql)
                    if int(version) < 3:
                        await conn.execute(q.fill_timestamps, self.clock())
                    await _count_participants(conn, q)
                    version = await conn.fetchval(q.version_get)
        if version is None or int(version) != SCHEMA_VERSION:
            raise StoreError(
                f"PostgreSQL store {self.where} schema {q.schema} has schema version {version}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 to 4) only"
            )
        try:
            async with conn.transaction():
                await lock()
                if not await conn.fetchval(q.function_exists, q.schema, appends.FUNCTION):
                    await conn.execute(q.create_append_function)
        except asyncpg.InsufficientPrivilegeError as exc:  # a role that may use the schema, not create in it
            self.appends_refused = (
                f"PostgreSQL schema {q.schema} at {self.where} has no function {appends.FUNCTION} and this role"
                f" may not create it ({exc}): run chatlab once with a role that may create in the schema"
            )
            log.warning("%s; appends fail until then", self.appends_refused)
        await self._ensure_plain_index(conn, lock)
        self.ready = True

    async def _ensure_plain_index(self, conn: PoolConnectionProxy, lock: Callable[[], Awaitable[object]]) -> None:
        """Create :data:`~.statements.PLAIN_INDEX` where it is missing (a schema made before it: built once, holding
        off writes meanwhile). A role that does not own the table may not: the plain pages then read past the
        namespaced keys, correct but slower, and a log line says so."""
        import asyncpg

        q = self.statements
        if await conn.fetchval(q.index_exists, q.schema, PLAIN_INDEX):
            return
        try:
            async with conn.transaction():
                await lock()
                await conn.execute(q.create_plain_index)
        except asyncpg.InsufficientPrivilegeError as exc:
            log.warning(
                "PostgreSQL schema %s at %s has no index %s and this role may not create it (%s): a service without "
                "API keys reads past the namespaced conversations for each page until a role owning the table runs "
                "chatlab once",
                q.schema,
                self.where,
                PLAIN_INDEX,
                exc,
            )


async def _count_participants(conn: PoolConnectionProxy, q: Statements) -> None:
    """Count each conversation's authors from its stored messages (through a cursor, in the upgrade's transaction),
    as appends count them from now on; conversations nobody signed keep the column's empty default."""
    counted: dict[str, dict[str, int]] = {}
    async for row in conn.cursor(q.all_messages):
        author = author_of(row[1])
        if author is not None:
            authors = counted.setdefault(row[0], {})
            authors[author] = authors.get(author, 0) + 1
    await conn.executemany(q.set_participants, [(key, json_object(authors)) for key, authors in counted.items()])
