"""The creation or in-place upgrade (from versions 1 to 3) of the tables, by processes that may start together: under
an advisory lock on the schema's name, looking again after the wait, and only where something is missing (a role with
no ``CREATE`` right can use a schema someone else made). An append function an older chatlab made is left as it is,
so older processes can share the tables."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..base import StoreError
from .statements import SCHEMA_VERSION, Statements

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

    async def ensure(self, conn: PoolConnectionProxy) -> None:
        """Create or upgrade the schema's tables unless done (a :class:`StoreError` if their version is unknown)."""
        if self.ready:
            return
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
                    version = await conn.fetchval(q.version_get)
        if version is None or int(version) != SCHEMA_VERSION:
            raise StoreError(
                f"PostgreSQL store {self.where} schema {q.schema} has schema version {version}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 to 3) only"
            )
        self.ready = True
