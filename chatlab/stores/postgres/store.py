"""Chat history in PostgreSQL, shared by any number of service processes (design: docs/stores.md). Each write is one
transaction under an advisory lock on its conversation's key, so the ``if_match`` check, an append's idempotency record
and the write are one atomic step; whoever takes several locks takes them in one order, so they never deadlock."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace as replace_fields
from typing import TYPE_CHECKING, NamedTuple

from ...authors import count_authors
from .._urls import split_url
from ..append_rule import changes_nothing
from ..base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationRecord,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    Metadata,
    StoreError,
    VersionMismatch,
    WriteResult,
    check_slice,
    json_object,
    listing_start,
    new_generation,
    new_version,
    prefix_upper_bound,
    version_matches,
)
from ..metadata import MetadataChange
from .appends import AppendMember, AppendOutcome, append_many
from .batches import Batcher
from .connections import CHATLAB_PARAMETERS, Connections, redacted
from .schema import Schema
from .statements import SCHEMA_VERSION, Statements

if TYPE_CHECKING:
    from asyncpg import Record
    from asyncpg.pool import PoolConnectionProxy

INT8_MAX = 2**63 - 1
ReadRequest = tuple[str, int, int | None]  # one read of a batch: the key, after and limit (None: all)


class Batches(NamedTuple):
    """The store's batchers of one event loop."""

    reads: Batcher[ReadRequest, ConversationSlice]
    appends: Batcher[AppendMember, AppendOutcome]


def _summary(row: Record) -> ConversationSummary:
    key, count, version, created_at, updated_at, title, tags, participants = row
    return ConversationSummary(
        key, count, version, created_at, updated_at, title, json.loads(tags), json.loads(participants)
    )


def _check_key(conversation_key: str) -> None:
    if "\x00" in conversation_key:
        raise StoreError("PostgreSQL text cannot hold a NUL character: the conversation key has one")


class PostgresChatHistoryStore(ChatHistoryStore):
    """History in four tables of one schema (``schema`` or ``?schema=NAME``; ``public``), created on first use."""

    schema_version = SCHEMA_VERSION

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        timeout: float = 5.0,
        statement_timeout: float | None = 30.0,
        min_size: int = 1,
        max_size: int = 10,
        read_statements: int = 2,
        append_statements: int = 1,
        max_batch: int = 64,
    ) -> None:
        try:
            import asyncpg  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the PostgreSQL store needs asyncpg: pip install 'chatlab[postgres]'") from exc
        self.conninfo, ours = split_url(url, CHATLAB_PARAMETERS)
        self.schema = schema or ours.get("schema") or "public"
        self.read_statements = max(1, min(read_statements, max_size))
        self.append_statements = max(1, min(append_statements, max_size))
        self.max_batch = max_batch
        self.timeout = timeout
        self.where = redacted(self.conninfo)
        self.description = (
            f"Chat history is stored in PostgreSQL at {self.where} (schema {self.schema}) and exposed over HTTP."
        )
        self.statements = Statements(self.schema)
        self._schema = Schema(self.statements, where=self.where, clock=lambda: self.clock())
        self.connections = Connections(
            self.conninfo, lambda: self.timeout, min_size, max_size, statement_timeout, prepare=self._schema.ensure
        )
        self._batches: dict[asyncio.AbstractEventLoop, Batches] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} schema={self.schema}>"

    def batches(self) -> Batches:
        """The running event loop's batchers of reads and appends, made on its first call (those of loops that
        closed are dropped then)."""
        loop = asyncio.get_running_loop()
        batches = self._batches.get(loop)
        if batches is None:
            for closed in [other for other in self._batches if other.is_closed()]:
                del self._batches[closed]
            batches = Batches(
                Batcher(self._read_many, self.connections, self.read_statements, self.max_batch),
                Batcher(self._append_many, self.connections, self.append_statements, self.max_batch),
            )
            self._batches[loop] = batches
        return batches

    async def _read_many(self, requests: list[ReadRequest], deadline: float) -> list[ConversationSlice]:
        # positions past bigint read as far as any can
        afters = [min(after, INT8_MAX) for _, after, _ in requests]
        limits = [None if limit is None or limit > INT8_MAX else limit for _, _, limit in requests]
        async with self.connections.acquire(deadline) as conn:
            rows = await conn.fetch(self.statements.read, [key for key, _, _ in requests], afters, limits)
        return [  # no such conversation: a NULL count, and no messages
            ConversationSlice(messages, after, count or 0, ABSENT if count is None else version)
            for (_, after, _), (count, version, messages) in zip(requests, rows, strict=True)
        ]

    async def _append_many(self, members: list[AppendMember], deadline: float) -> list[AppendOutcome]:
        async with self.connections.acquire(deadline) as conn:
            if self._schema.appends_refused is not None:
                raise StoreError(self._schema.appends_refused)
            return await append_many(conn, self.statements.append, members)

    async def read(self, conversation_key: str) -> Conversation:
        """The whole conversation, read with the reads waiting at the same moment in one statement."""
        whole = await self.read_slice(conversation_key)
        return Conversation(whole.messages, whole.version)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        """The range asked for, read with the reads waiting at the same moment in one statement."""
        check_slice(after, limit)
        _check_key(conversation_key)
        return await self.batches().reads.submit((conversation_key, after, limit))

    def _lock_key(self, conversation_key: str) -> str:
        return f"chatlab:{self.schema}:{conversation_key}"

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Decided by the schema's append function with the appends waiting at the same moment, in one statement
        (:mod:`.appends`); its outcome read back as the store's answer."""
        if changes_nothing(messages, if_match, idempotency):
            return WriteResult(await self.version(conversation_key))
        _check_key(conversation_key)
        batch = [bytes(m) for m in messages]
        member = AppendMember(
            lock_key=self._lock_key(conversation_key),
            conversation_key=conversation_key,
            now=time.time(),
            messages=batch,
            generation=new_generation(),
            written_at=self.clock(),
            if_match=None if if_match is None else list(if_match),
            idempotency=idempotency,
            authors=count_authors(batch),
        )
        outcome = await self.batches().appends.submit(member)
        return outcome.answer(idempotency)

    async def _lock(self, conn: PoolConnectionProxy, keys: list[str]) -> None:
        """Take the conversations' write locks until commit (the append function takes the same ones)."""
        await conn.execute(self.statements.lock_many, [self._lock_key(key) for key in keys])

    async def _check(self, conn: PoolConnectionProxy, conversation_key: str, if_match: Collection[str] | None) -> None:
        current = await conn.fetchval(self.statements.current, conversation_key) or ABSENT
        if not version_matches(current, if_match):
            raise VersionMismatch(current)

    async def _check_metadata(self, conn: PoolConnectionProxy, conversation_key: str, expected: Metadata) -> None:
        """Raise :class:`MetadataChanged` unless the conversation carries ``expected`` (an absent one carries none)."""
        row = await conn.fetchrow(self.statements.summary_for_update, conversation_key)
        if row is None:
            expected.check(None, {})
        else:
            held = _summary(row)
            expected.check(held.title, held.tags)

    async def _write_messages(self, conn: PoolConnectionProxy, conversation_key: str, messages: list[bytes]) -> None:
        await conn.execute(self.statements.delete_messages, [conversation_key])
        if messages:
            await conn.execute(self.statements.insert_messages, conversation_key, messages)

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        """One transaction under the conversation's advisory lock."""
        _check_key(conversation_key)
        batch = [bytes(m) for m in messages]
        participants = json_object(count_authors(batch))
        async with self.connections.acquire() as conn, conn.transaction():
            await self._lock(conn, [conversation_key])
            await self._check(conn, conversation_key, if_match)
            version = new_version(len(batch))
            now = self.clock()
            row = (conversation_key, len(batch), version, now, now, participants)
            await conn.execute(self.statements.replace_count, *row)
            await self._write_messages(conn, conversation_key, batch)
            return WriteResult(version)

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        """One transaction under the conversation's advisory lock."""
        _check_key(conversation_key)
        async with self.connections.acquire() as conn, conn.transaction():
            await self._lock(conn, [conversation_key])
            await self._check(conn, conversation_key, if_match)
            await conn.execute(self.statements.delete_conversation, conversation_key)
            await conn.execute(self.statements.delete_messages, [conversation_key])

    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> list[ConversationSummary]:
        """A range of the primary key's index, or (``plain``) of the plain keys' partial index (planned for the tags
        asked for, when some are)."""
        # a page from its start (skipped when exclusive), up to the prefix's upper bound
        start, inclusive = listing_start(prefix, after)
        skip = None if inclusive else start
        upper = prefix_upper_bound(prefix)
        tagged = json.dumps(dict(tags)) if tags else None
        args = [start, skip, limit, *(arg for arg in (upper, tagged) if arg is not None)]
        statement = self.statements.pages[upper is not None, tagged is not None, plain]
        async with self.connections.acquire() as conn:
            if tagged is None:
                return [_summary(row) for row in await conn.fetch(statement, *args)]
            # planned for the tags asked for, never by a generic plan: a rare tag is then found through the
            # tags' index, a common one along the keys' (a generic plan keeps to one of them for every tag)
            async with conn.transaction(readonly=True):
                await conn.execute(self.statements.custom_plans)
                rows = await conn.fetch(statement, *args)
        return [_summary(row) for row in rows]

    async def set_metadata(
        self,
        conversation_key: str,
        change: MetadataChange,
        *,
        expected: Metadata | None = None,
        if_match: Collection[str] | None = None,
    ) -> ConversationSummary | None:
        """One transaction under the conversation's advisory lock (so ``if_match`` holds against appends too), the
        row locked from read to write: changes apply in turn, a delete comes before (None) or waits."""
        _check_key(conversation_key)
        async with self.connections.acquire() as conn, conn.transaction():
            await self._lock(conn, [conversation_key])
            await self._check(conn, conversation_key, if_match)
            row = await conn.fetchrow(self.statements.summary_for_update, conversation_key)
            if row is None:
                return None
            before = _summary(row)
            if expected is not None:
                expected.check(before.title, before.tags)
            title, tags = change.applied(before.title, before.tags)
            await conn.execute(self.statements.set_metadata, conversation_key, title, json_object(tags))
        return replace_fields(before, title=title, tags=tags)

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        """One transaction, every record's lock taken first in the one order."""
        for record in records:
            _check_key(record.conversation_key)
        counted = [json_object(count_authors(record.messages)) for record in records]  # before the locks
        async with self.connections.acquire() as conn, conn.transaction():
            await self._lock(conn, [r.conversation_key for r in records])
            for record, participants in zip(records, counted, strict=True):
                key = record.conversation_key
                await self._check(conn, key, [record.expected])
                if record.expected_metadata is not None:
                    await self._check_metadata(conn, key, record.expected_metadata)
                fields = (len(record.messages), record.version, record.created_at, record.updated_at, record.title)
                tags = json_object(record.tags)
                await conn.execute(self.statements.restore_count, key, *fields, tags, participants)
                await self._write_messages(conn, key, [bytes(m) for m in record.messages])

    async def sweep(self) -> int:
        """A bounded batch of conversations per transaction, their locks taken in the one order."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        q = self.statements
        deleted = 0
        while True:
            async with self.connections.acquire() as conn, conn.transaction():
                due = [row[0] for row in await conn.fetch(q.due, cutoff)]
                if not due:
                    return deleted
                await self._lock(conn, due)
                gone = [row[0] for row in await conn.fetch(q.sweep, due, cutoff)]
                await conn.execute(q.delete_messages, gone)
                deleted += len(gone)

    async def close(self) -> None:
        """Drop the batchers and close every event loop's pool."""
        self._batches.clear()
        await self.connections.close()
