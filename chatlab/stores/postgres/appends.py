"""The append rules, in one server-side function: it locks a batch's conversations, reads what they need, decides
each member in arrival order (seeing those before it), then writes all it decided in one statement. A live idempotency
record of the member's key (``expires_at`` after its ``now``) answers it; else If-Match must hold (the version, ``"0"``
when absent, is in the list, or it holds ``"*"`` and the conversation exists); then the member writes its messages
after the last, a version of the conversation's generation and new count (an empty append keeps the version), and its
record if it has a key (which purges a few expired ones). A written member adds how many of its messages each author
signed (counted in Python by :mod:`chatlab.authors`) to its conversation's ``participants``, read with its version
and written with its count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from ..base import ABSENT, Idempotency, IdempotencyKeyReused, VersionMismatch, WriteResult

if TYPE_CHECKING:
    from asyncpg import Connection
    from asyncpg.pool import PoolConnectionProxy

FUNCTION = "chatlab_append_many_4"  # a new body, a new name: each chatlab version sharing a database calls its own

NO_AUTHORS: Mapping[str, int] = MappingProxyType({})  # a member none of whose messages is signed

PURGE_BATCH = 16  # expired idempotency records deleted per record written (part of the function's body)
PURGE_SCAN = 1024  # the purge's inner bound, a constant: even a generic plan reads the expiry index in order


class AppendMember(NamedTuple):
    """One append of a batch, as the function takes it."""

    lock_key: str  # the conversation's advisory lock key (every writer of it takes the same one)
    conversation_key: str
    now: float  # wall-clock time: idempotency records that expire at or before it are dead
    messages: Sequence[bytes]
    generation: str  # the version's generation if the conversation does not exist yet
    written_at: float  # the store's clock: the conversation's updated_at (and created_at when new)
    if_match: Sequence[str] | None = None
    idempotency: Idempotency | None = None  # its record expires ``ttl`` seconds after ``now``
    authors: Mapping[str, int] = NO_AUTHORS  # how many of its messages each author signed


class AppendOutcome(NamedTuple):
    """What the function did with one member (the store reads it back as its answer)."""

    before: str | None  # the conversation's version before the member (None: it did not exist)
    fingerprint: str | None  # the live idempotency record that answered it (None: none did)...
    recorded: str | None  # ... and the version it recorded
    written: str | None  # the version the member wrote (None: refused)

    def answer(self, idempotency: Idempotency | None) -> WriteResult:
        """The append's answer to its caller, or its refusal raised: the function found a live record of the key
        (a replay if the fingerprints agree, else :class:`IdempotencyKeyReused`), or refused ``If-Match``
        (:class:`VersionMismatch` with the version it saw), or wrote."""
        if idempotency is not None and self.fingerprint is not None:
            if self.fingerprint != idempotency.fingerprint:
                raise IdempotencyKeyReused(idempotency.key)
            return WriteResult(self.recorded or ABSENT, replayed=True)
        if self.written is None:
            raise VersionMismatch(self.before or ABSENT)
        return WriteResult(self.written)


CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION {function}(
    member_lock_key text[],          -- per member: the conversation's advisory lock key
    member_key text[],               -- per member: the conversation key
    member_now float8[],             -- per member: wall-clock time (records expiring at or before it are dead)
    member_added int4[],             -- per member: how many messages it appends
    all_bodies bytea[],              -- every member's messages, one after the other
    member_generation text[],        -- per member: the generation of a conversation it creates
    member_written_at float8[],      -- per member: the store's clock, for created_at and updated_at
    all_if_match text[],             -- every member's If-Match versions, one list after the other
    member_if_match_length int4[],   -- per member: how many of all_if_match are its own (-1: no If-Match)
    member_idempotency_key text[],   -- per member: its Idempotency-Key (NULL: none)
    member_fingerprint text[],       -- per member: its request's fingerprint
    member_expires_at float8[],      -- per member: when the record it writes expires
    member_author_count int4[],      -- per member: how many authors signed its messages
    all_author_names text[],         -- every member's authors, one list after the other
    all_author_signed int4[]         -- how many messages each of them signed
)
RETURNS TABLE (o_index int4, o_version text, o_fingerprint text, o_recorded text, o_written text)
-- generic plans (planned once per session), maybe while the tables are empty: so no sequential scan
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
AS $fn$
DECLARE
    members int4 := cardinality(member_key);
    row_ record;
    member int4;
    first_member int4;  -- the conversation's first member in the batch: its state lives at that index
    -- each conversation's state, at its first member's index, as the members before the current one left it
    conversation_version text[];     -- NULL: the conversation does not exist
    version_count int8[];            -- the count in its version
    next_position int8[];            -- the position of its next message
    generation text[];               -- its version's generation (NULL: not yet chosen)
    participants jsonb[];            -- how many of its messages each author signed
    added int8[];                    -- messages this batch appends to it
    first_written float8[];          -- created_at, if this batch creates it
    last_written float8[];           -- updated_at
    -- each idempotency record, at the index of the first member with its conversation and key
    record_fingerprint text[];
    record_version text[];
    record_expires_at float8[];
    record_written bool[];           -- true: this batch writes it
    records_written int4 := 0;
    -- each member's place in the flattened arrays, and where its messages go
    body_offset int4[];
    bodies_seen int4 := 0;
    author_offset int4;
    authors_seen int4 := 0;
    author int4;
    if_match_seen int4 := 0;
    first_position int8[];           -- NULL: the member writes no message
    current_version text;
    if_match text[];
    written text;
BEGIN
    -- the locks in the one order of every taker of several (the key's hash): batches, sweep, restore never deadlock
    PERFORM pg_advisory_xact_lock(locks.hash)
    FROM (SELECT DISTINCT hashtextextended(lock_key, 0) AS hash
          FROM unnest(member_lock_key) AS lock_key ORDER BY hash OFFSET 0) AS locks;

    -- a fresh snapshot after the locks: each stored conversation at its first member, each record at its first
    FOR row_ IN
        SELECT m.i::int4 AS i, m.first_of_key::int4 AS first_of_key, m.first_of_record::int4 AS first_of_record,
               stored.version, stored.message_count, stored.participants, rec.fingerprint,
               rec.version AS recorded, rec.expires_at
        FROM (SELECT t.i, t.k, t.ik,
                     first_value(t.i) OVER (PARTITION BY t.k ORDER BY t.i) AS first_of_key,
                     CASE WHEN t.ik IS NOT NULL
                          THEN first_value(t.i) OVER (PARTITION BY t.k, t.ik ORDER BY t.i) END AS first_of_record
              FROM unnest(member_key, member_idempotency_key) WITH ORDINALITY AS t(k, ik, i)) AS m
        -- lateral lookups (OFFSET 0: not joined as tables), so index probes whatever the plan's statistics
        LEFT JOIN LATERAL (SELECT x.version, x.message_count, x.participants FROM {conversations} x
                           WHERE m.first_of_key = m.i AND x.conversation_key = m.k OFFSET 0) AS stored ON true
        LEFT JOIN LATERAL (SELECT x.fingerprint, x.version, x.expires_at FROM {idempotency} x
                           WHERE m.first_of_record = m.i AND x.conversation_key = m.k
                             AND x.idempotency_key = m.ik OFFSET 0) AS rec ON true
        ORDER BY m.i
    LOOP
        member := row_.i;
        first_member := row_.first_of_key;
        body_offset[member] := bodies_seen;
        bodies_seen := bodies_seen + member_added[member];
        author_offset := authors_seen;
        authors_seen := authors_seen + member_author_count[member];
        IF first_member = member THEN
            conversation_version[member] := row_.version;
            next_position[member] := coalesce(row_.message_count, 0);
            version_count[member] := CASE WHEN row_.version IS NULL THEN 0 ELSE row_.message_count END;
            participants[member] := coalesce(row_.participants, '{{}}');
            generation[member] := CASE
                WHEN row_.version IS NULL OR row_.version = '0' THEN NULL
                WHEN row_.version ~ '^.+[.][0-9]+$' THEN regexp_replace(row_.version, '[.][0-9]+$', '')
                ELSE row_.version  -- a bare token, written before versions had a count
            END;
        END IF;
        IF row_.first_of_record = member THEN
            record_fingerprint[member] := row_.fingerprint;
            record_version[member] := row_.recorded;
            record_expires_at[member] := row_.expires_at;
        END IF;

        o_index := member;
        o_version := conversation_version[first_member];
        o_fingerprint := NULL;
        o_recorded := NULL;
        o_written := NULL;
        -- 1. a live record of the member's key answers it (the store compares the fingerprints)
        IF row_.first_of_record IS NOT NULL AND record_expires_at[row_.first_of_record] > member_now[member] THEN
            o_fingerprint := record_fingerprint[row_.first_of_record];
            o_recorded := record_version[row_.first_of_record];
        END IF;
        -- 2. else If-Match must hold
        current_version := coalesce(conversation_version[first_member], '0');
        if_match := CASE WHEN member_if_match_length[member] < 0 THEN NULL
                         ELSE all_if_match[if_match_seen + 1 : if_match_seen + member_if_match_length[member]] END;
        if_match_seen := if_match_seen + greatest(member_if_match_length[member], 0);
        IF o_fingerprint IS NULL AND (if_match IS NULL OR current_version = ANY(if_match)
                                      OR ('*' = ANY(if_match) AND current_version <> '0')) THEN
            -- 3. the messages go after the last, at the generation's new count (an empty append keeps the version)
            IF member_added[member] = 0 THEN
                written := current_version;
            ELSE
                generation[first_member] := coalesce(generation[first_member], member_generation[member]);
                written := generation[first_member] || '.' || (version_count[first_member] + member_added[member]);
                first_position[member] := next_position[first_member];
                next_position[first_member] := next_position[first_member] + member_added[member];
                version_count[first_member] := next_position[first_member];
                conversation_version[first_member] := written;
                added[first_member] := coalesce(added[first_member], 0) + member_added[member];
                first_written[first_member] := coalesce(first_written[first_member], member_written_at[member]);
                last_written[first_member] := member_written_at[member];
                -- its messages' authors add to the conversation's participants
                FOR author IN author_offset + 1 .. author_offset + member_author_count[member] LOOP
                    participants[first_member] := participants[first_member] || jsonb_build_object(
                        all_author_names[author],
                        coalesce((participants[first_member] ->> all_author_names[author])::int8, 0)
                            + all_author_signed[author]);
                END LOOP;
            END IF;
            -- 4. a member with a key records the version it answered
            IF row_.first_of_record IS NOT NULL THEN
                record_fingerprint[row_.first_of_record] := member_fingerprint[member];
                record_version[row_.first_of_record] := written;
                record_expires_at[row_.first_of_record] := member_expires_at[member];
                IF record_written[row_.first_of_record] IS NULL THEN
                    records_written := records_written + 1;
                END IF;
                record_written[row_.first_of_record] := true;
            END IF;
            o_written := written;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- one write of everything decided: the messages, the conversations, the records (and a purge of expired ones)
    IF added IS NOT NULL OR records_written > 0 THEN
        WITH new_messages AS (
            INSERT INTO {messages} (conversation_key, position, body)
            SELECT member_key[s.i], first_position[s.i] + g.j - 1, all_bodies[body_offset[s.i] + g.j]
            FROM generate_series(1, members) AS s(i)
            CROSS JOIN LATERAL generate_series(1, member_added[s.i]) AS g(j)
            WHERE first_position[s.i] IS NOT NULL
        ), new_counts AS (
            INSERT INTO {conversations} AS x
                (conversation_key, message_count, version, created_at, updated_at, participants)
            SELECT member_key[s.i], added[s.i], conversation_version[s.i], first_written[s.i], last_written[s.i],
                   participants[s.i]
            FROM generate_series(1, members) AS s(i)
            WHERE added[s.i] > 0
            ON CONFLICT (conversation_key) DO UPDATE SET
                message_count = x.message_count + excluded.message_count,
                version = excluded.version,
                updated_at = excluded.updated_at,
                participants = excluded.participants  -- read under the locks, with what the batch added
        ), purged AS (
            -- the oldest expired records, through the expiry index, skipping those a concurrent append deletes and
            -- those this statement writes (it must not touch a row twice); by row ids, whatever the plan's guess
            DELETE FROM {idempotency} WHERE ctid = ANY(ARRAY(
                SELECT expired.ctid FROM (
                    SELECT ctid FROM {idempotency}
                    WHERE records_written > 0
                      AND expires_at <= (SELECT min(t) FROM unnest(member_now) AS t)
                      AND NOT coalesce(conversation_key = ANY(member_key)
                                       AND idempotency_key = ANY(member_idempotency_key), false)
                    ORDER BY expires_at LIMIT {purge_scan} FOR UPDATE SKIP LOCKED
                ) AS expired LIMIT {purge_batch} * records_written))
        )
        INSERT INTO {idempotency} (conversation_key, idempotency_key, fingerprint, version, expires_at)
        SELECT member_key[s.i], member_idempotency_key[s.i], record_fingerprint[s.i], record_version[s.i],
               record_expires_at[s.i]
        FROM generate_series(1, members) AS s(i)
        WHERE record_written[s.i]
        ON CONFLICT (conversation_key, idempotency_key) DO UPDATE SET
            fingerprint = excluded.fingerprint, version = excluded.version, expires_at = excluded.expires_at;
    END IF;
END
$fn$
"""
"""The function: fifteen arrays in, one outcome row per member out (:class:`AppendOutcome`). Format it with the
schema's quoted names (:class:`~chatlab.stores.postgres.statements.Statements`), :data:`PURGE_SCAN` and
:data:`PURGE_BATCH`."""

CALL = (
    "SELECT * FROM {function}($1::text[], $2::text[], $3::float8[], $4::int4[], $5::bytea[],"
    " $6::text[], $7::float8[], $8::text[], $9::int4[], $10::text[], $11::text[], $12::float8[], $13::int4[],"
    " $14::text[], $15::int4[])"
)


async def append_many(
    conn: Connection | PoolConnectionProxy, call: str, members: Sequence[AppendMember]
) -> list[AppendOutcome]:
    """Run a batch (``call``: :data:`CALL` filled in) on ``conn``, in one implicit transaction; the outcomes in the
    members' order. The messages and the ``if_match`` lists go flattened, with each list's length (-1: none)."""
    rows = await conn.fetch(
        call,
        [m.lock_key for m in members],
        [m.conversation_key for m in members],
        [m.now for m in members],
        [len(m.messages) for m in members],
        [body for m in members for body in m.messages],
        [m.generation for m in members],
        [m.written_at for m in members],
        [version for m in members if m.if_match is not None for version in m.if_match],
        [-1 if m.if_match is None else len(m.if_match) for m in members],
        [None if m.idempotency is None else m.idempotency.key for m in members],
        [None if m.idempotency is None else m.idempotency.fingerprint for m in members],
        [None if m.idempotency is None else m.now + m.idempotency.ttl for m in members],
        [len(m.authors) for m in members],
        [name for m in members for name in m.authors],
        [signed for m in members for signed in m.authors.values()],
    )
    return [AppendOutcome(*row[1:]) for row in sorted(rows, key=lambda row: row[0])]
