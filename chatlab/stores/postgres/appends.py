"""A batch of appends in one transaction driven from Python: lock the batch's conversations, read their versions,
counts and live idempotency records, decide each member in arrival order with
:func:`~chatlab.stores.append_rule.decide_append` (each sees those before it), then write everything decided in one
statement. The rule itself lives in :mod:`chatlab.stores.append_rule`, nowhere else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from ..append_rule import AppendDecision, Recorded, decide_append
from ..base import ABSENT, Idempotency

if TYPE_CHECKING:
    from asyncpg import Connection
    from asyncpg.pool import PoolConnectionProxy

    from .statements import Statements

PURGE_BATCH = 16  # expired idempotency records deleted per record written, so the table never grows without bound


class AppendMember(NamedTuple):
    """One append of a batch, as the store was asked for it."""

    conversation_key: str
    messages: Sequence[bytes]
    if_match: Sequence[str] | None = None
    idempotency: Idempotency | None = None  # its record expires ``ttl`` seconds after the batch's ``now``


@dataclass
class _Writes:
    """What a batch's decisions write, as the columns of the write statement's arrays."""

    message_keys: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    conversations: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (version, count) after
    records: dict[tuple[str, str], tuple[Recorded, float]] = field(default_factory=dict)  # -> (record, expires at)

    def add(self, member: AppendMember, before: int, decision: AppendDecision, now: float) -> None:
        """Note what ``decision`` writes for ``member`` (its conversation held ``before`` messages)."""
        key = member.conversation_key
        if decision.writes_messages:
            for position, body in enumerate(member.messages, before):
                self.message_keys.append(key)
                self.positions.append(position)
                self.bodies.append(body)
            self.conversations[key] = (decision.version, decision.count)
        if decision.record is not None and member.idempotency is not None:
            expires_at = now + member.idempotency.ttl
            self.records[key, member.idempotency.key] = (decision.record, expires_at)


async def append_many(
    conn: Connection | PoolConnectionProxy,
    statements: Statements,
    members: Sequence[AppendMember],
    *,
    now: float,
    written_at: float,
) -> list[AppendDecision]:
    """Decide and write a batch in one transaction on ``conn``; the decisions in the members' order. ``now``: wall-clock
    time (records expiring at or before it are dead); ``written_at``: the store's clock, for the conversations."""
    keys = list(dict.fromkeys(member.conversation_key for member in members))
    pairs = list(dict.fromkeys((m.conversation_key, m.idempotency.key) for m in members if m.idempotency is not None))
    async with conn.transaction():
        # the locks in the one order every taker of several uses: batches, sweep and restore never deadlock
        await conn.execute(statements.lock_many, [statements.lock_key(key) for key in keys])
        # read after the locks (a statement of its own, so its snapshot is taken once they are held)
        rows = await conn.fetch(
            statements.append_state, keys, [key for key, _ in pairs], [record for _, record in pairs], now
        )
        conversations: dict[str, tuple[str, int]] = {}
        records: dict[tuple[str, str], Recorded] = {}
        for key, record_key, version, count, fingerprint in rows:
            if record_key is None:
                conversations[key] = (version or ABSENT, count)
            else:
                records[key, record_key] = Recorded(fingerprint, version)
        decisions: list[AppendDecision] = []
        writes = _Writes()
        for member in members:
            key = member.conversation_key
            version, count = conversations.get(key, (ABSENT, 0))
            idempotency = member.idempotency
            recorded = None if idempotency is None else records.get((key, idempotency.key))
            decision = decide_append(
                version,
                count,
                len(member.messages),
                if_match=member.if_match,
                idempotency=idempotency,
                recorded=recorded,
            )
            writes.add(member, count, decision, now)
            conversations[key] = (decision.version, decision.count)
            if decision.record is not None and idempotency is not None:
                records[key, idempotency.key] = decision.record
            decisions.append(decision)
        if writes.conversations or writes.records:
            await _write(conn, statements, writes, now, written_at)
    return decisions


async def _write(
    conn: Connection | PoolConnectionProxy, statements: Statements, writes: _Writes, now: float, written_at: float
) -> None:
    """Everything a batch decided, in one statement (and a purge of a few expired records per record written)."""
    conversation_keys = list(writes.conversations)
    record_pairs = list(writes.records)
    await conn.execute(
        statements.append_write,
        writes.message_keys,
        writes.positions,
        writes.bodies,
        conversation_keys,
        [writes.conversations[key][1] for key in conversation_keys],
        [writes.conversations[key][0] for key in conversation_keys],
        written_at,
        [key for key, _ in record_pairs],
        [record for _, record in record_pairs],
        [writes.records[pair][0].fingerprint for pair in record_pairs],
        [writes.records[pair][0].version for pair in record_pairs],
        [writes.records[pair][1] for pair in record_pairs],
        now,
        PURGE_BATCH * len(record_pairs),
    )
