"""The append rules, in one server-side function: it locks a batch's conversations, reads what they need, decides
each member in arrival order (seeing those before it), then writes all it decided in one statement. A live idempotency
record of the member's key (``expires_at`` after its ``now``) answers it; else If-Match must hold (the version, ``"0"``
when absent, is in the list, or it holds ``"*"`` and the conversation exists); then the member writes its messages
after the last, a version of the conversation's generation and new count (an empty append keeps the version), and its
record if it has a key (which purges a few expired ones)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from asyncpg import Connection
    from asyncpg.pool import PoolConnectionProxy

    from ..base import Idempotency

FUNCTION = "chatlab_append_many_2"  # a new body, a new name: each chatlab version sharing a database calls its own

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


class AppendOutcome(NamedTuple):
    """What the function did with one member (the store reads it back as its answer)."""

    before: str | None  # the conversation's version before the member (None: it did not exist)
    fingerprint: str | None  # the live idempotency record that answered it (None: none did)...
    recorded: str | None  # ... and the version it recorded
    written: str | None  # the version the member wrote (None: refused)


CREATE_FUNCTION = (
    "CREATE OR REPLACE FUNCTION {function}(text[], text[], float8[], int4[], bytea[], text[],"
    " float8[], text[], int4[], text[], text[], float8[])"
    " RETURNS TABLE (o_index int4, o_version text, o_fingerprint text, o_recorded text, o_written text)"
    # generic plans (planned once per session), maybe while the tables are empty: so no sequential scan
    " LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off"
    " AS $fn$ DECLARE n int4 := cardinality($2); r record; i int4; ci int4;"
    " cv text[]; cn int8[]; cp int8[]; cg text[]; ca int8[]; cf float8[]; cl float8[];"
    " pf text[]; pv text[]; pe float8[]; pw bool[]; wp int8[]; bo int4[];"
    " mo int4 := 0; bn int4 := 0; records int4 := 0; v text; mt text[]; ok bool; w text; BEGIN"
    # the locks in the one order of every taker of several (the key's hash): batches, sweep, restore never deadlock
    " PERFORM pg_advisory_xact_lock(s.h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
    " FROM unnest($1) AS k ORDER BY h OFFSET 0) AS s;"
    # a fresh snapshot after the locks: the stored conversations and records, at their first members
    " FOR r IN SELECT m.i::int4 AS i, m.c::int4 AS c, m.p::int4 AS p, cs.version AS v, cs.message_count AS mc,"
    " d.fingerprint AS fp, d.version AS rv, d.expires_at AS re"
    " FROM (SELECT t.i, t.k, t.ik, first_value(t.i) OVER (PARTITION BY t.k ORDER BY t.i) AS c,"
    " CASE WHEN t.ik IS NOT NULL THEN first_value(t.i) OVER (PARTITION BY t.k, t.ik ORDER BY t.i) END AS p"
    " FROM unnest($2, $10) WITH ORDINALITY AS t(k, ik, i)) AS m"
    # lateral lookups (OFFSET 0: not joined as tables), so index probes whatever the plan's statistics
    " LEFT JOIN LATERAL (SELECT x.version, x.message_count FROM {conversations} x WHERE m.c = m.i"
    " AND x.conversation_key = m.k OFFSET 0) AS cs ON true"
    " LEFT JOIN LATERAL (SELECT x.fingerprint, x.version, x.expires_at FROM {idempotency} x WHERE m.p = m.i"
    " AND x.conversation_key = m.k AND x.idempotency_key = m.ik OFFSET 0) AS d ON true"
    " ORDER BY m.i LOOP"
    " i := r.i; ci := r.c; bo[i] := bn; bn := bn + $4[i];"
    " IF ci = i THEN cv[i] := r.v; cp[i] := coalesce(r.mc, 0); cn[i] := CASE WHEN r.v IS NULL THEN 0 ELSE r.mc END;"
    " cg[i] := CASE WHEN r.v IS NULL OR r.v = '0' THEN NULL WHEN r.v ~ '^.+[.][0-9]+$'"
    " THEN regexp_replace(r.v, '[.][0-9]+$', '') ELSE r.v END; END IF;"
    " IF r.p = i THEN pf[i] := r.fp; pv[i] := r.rv; pe[i] := r.re; END IF;"
    " o_index := i; o_version := cv[ci]; o_fingerprint := NULL; o_recorded := NULL; o_written := NULL;"
    " IF r.p IS NOT NULL AND pe[r.p] > $3[i] THEN o_fingerprint := pf[r.p]; o_recorded := pv[r.p]; END IF;"
    " v := coalesce(cv[ci], '0'); mt := CASE WHEN $9[i] < 0 THEN NULL ELSE $8[mo + 1:mo + $9[i]] END;"
    " mo := mo + greatest($9[i], 0);"
    " ok := o_fingerprint IS NULL AND (mt IS NULL OR v = ANY(mt) OR ('*' = ANY(mt) AND v <> '0'));"
    " IF ok THEN"
    " IF $4[i] = 0 THEN w := v; ELSE"
    " cg[ci] := coalesce(cg[ci], $6[i]); w := cg[ci] || '.' || (cn[ci] + $4[i]); wp[i] := cp[ci];"
    " cp[ci] := cp[ci] + $4[i]; cn[ci] := cp[ci]; cv[ci] := w;"
    " ca[ci] := coalesce(ca[ci], 0) + $4[i]; cf[ci] := coalesce(cf[ci], $7[i]); cl[ci] := $7[i]; END IF;"
    " IF r.p IS NOT NULL THEN pf[r.p] := $11[i]; pv[r.p] := w; pe[r.p] := $12[i];"
    " IF pw[r.p] IS NULL THEN records := records + 1; END IF; pw[r.p] := true; END IF;"
    " o_written := w; END IF;"
    " RETURN NEXT; END LOOP;"
    # one write of everything decided: the messages, the conversations, the records (and a purge of expired ones)
    " IF ca IS NOT NULL OR records > 0 THEN"
    " WITH msg AS (INSERT INTO {messages} (conversation_key, position, body)"
    " SELECT $2[s.i], wp[s.i] + g.j - 1, $5[bo[s.i] + g.j] FROM generate_series(1, n) AS s(i)"
    " CROSS JOIN LATERAL generate_series(1, $4[s.i]) AS g(j) WHERE wp[s.i] IS NOT NULL),"
    " cnv AS (INSERT INTO {conversations} AS x (conversation_key, message_count, version, created_at, updated_at)"
    " SELECT $2[s.i], ca[s.i], cv[s.i], cf[s.i], cl[s.i] FROM generate_series(1, n) AS s(i)"
    " WHERE ca[s.i] > 0 ON CONFLICT (conversation_key) DO UPDATE SET"
    " message_count = x.message_count + excluded.message_count, version = excluded.version,"
    " updated_at = excluded.updated_at),"
    # the purge: the oldest expired records, through the expiry index, skipping those a concurrent append deletes
    # and those this statement writes (it must not touch a row twice); by row ids, whatever the plan's guess
    " purged AS (DELETE FROM {idempotency} WHERE ctid = ANY(ARRAY(SELECT s.ctid FROM (SELECT ctid"
    " FROM {idempotency} WHERE records > 0 AND expires_at <= (SELECT min(u.t) FROM unnest($3) AS u(t))"
    " AND NOT coalesce(conversation_key = ANY($2) AND idempotency_key = ANY($10), false)"
    f" ORDER BY expires_at LIMIT {PURGE_SCAN} FOR UPDATE SKIP LOCKED) AS s LIMIT {PURGE_BATCH} * records)))"
    " INSERT INTO {idempotency} (conversation_key, idempotency_key, fingerprint, version, expires_at)"
    " SELECT $2[s.i], $10[s.i], pf[s.i], pv[s.i], pe[s.i] FROM generate_series(1, n) AS s(i)"
    " WHERE pw[s.i] ON CONFLICT (conversation_key, idempotency_key) DO UPDATE SET fingerprint = excluded.fingerprint,"
    " version = excluded.version, expires_at = excluded.expires_at; END IF; END $fn$"
)

CALL = (
    "SELECT * FROM {function}($1::text[], $2::text[], $3::float8[], $4::int4[], $5::bytea[],"
    " $6::text[], $7::float8[], $8::text[], $9::int4[], $10::text[], $11::text[], $12::float8[])"
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
    )
    return [AppendOutcome(*row[1:]) for row in sorted(rows, key=lambda row: row[0])]
