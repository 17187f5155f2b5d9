"""The PostgreSQL append function decides a batch set-based exactly as it decides the same members sent one at a
time, in arrival order (real PostgreSQL): the same answers, the same tables after. Random batches over few
conversations mix If-Match (current, stale, ``*``, empty lists), idempotency replays, keys reused with other bodies,
several members on one key, records that expire between members, empty appends, refusals beside successes, members
whose messages' authors add to the conversation's participants."""

from __future__ import annotations

import random
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from chatlab.stores.base import Idempotency
from chatlab.stores.postgres.appends import AppendMember
from tests.stores.conftest import drop_postgres_schema
from tests.stores.store_helpers import call_append_function

KEYS = ["a", "b", "c", "new1", "new2"]


def _open(base: str, schema: str) -> Any:
    """A connection to ``schema``, its tables and functions made by the store."""
    import asyncio

    import psycopg

    from chatlab.stores.postgres import PostgresChatHistoryStore

    async def create() -> None:
        store = PostgresChatHistoryStore(base, schema=schema)
        try:
            await store.read("x")
        finally:
            await store.close()

    asyncio.run(create())
    return psycopg.connect(base, autocommit=True)


def _seed(conn: Any, schema: str, now: float) -> None:
    """Conversations with messages (one with a bare version, one at version "0"), live and expired records."""
    s = f'"{schema}"'
    for key, count, version in [("a", 2, "gena.2"), ("b", 1, "legacy"), ("c", 0, "0")]:
        conn.execute(f"INSERT INTO {s}.chatlab_conversations VALUES (%s, %s, %s, 1.0, 1.0)", (key, count, version))
        for position in range(count):
            conn.execute(f"INSERT INTO {s}.chatlab_messages VALUES (%s, %s, %s)", (key, position, b"old"))
    records = [
        ("a", "i1", "f1", "gena.2", now + 1000),
        ("b", "i2", "f2", "legacy", now - 5),
        ("new1", "i1", "f1", "0", now + 1000),
    ]
    for record in records:
        conn.execute(f"INSERT INTO {s}.chatlab_idempotency VALUES (%s, %s, %s, %s, %s)", record)


def _state(conn: Any, schema: str, now: float) -> tuple[list[Any], ...]:
    s = f'"{schema}"'
    return (
        conn.execute(f"SELECT * FROM {s}.chatlab_conversations ORDER BY 1").fetchall(),
        conn.execute(f"SELECT * FROM {s}.chatlab_messages ORDER BY 1, 2").fetchall(),
        # live records only: the purge of expired ones goes by its own bounds
        conn.execute(f"SELECT * FROM {s}.chatlab_idempotency WHERE expires_at > %s ORDER BY 1, 2", (now,)).fetchall(),
    )


def _batch(rng: random.Random, conn: Any, schema: str, round_: int, now: float) -> list[AppendMember]:
    """A batch's members, If-Match lists guessed from the stored versions."""
    versions = dict(conn.execute(f'SELECT conversation_key, version FROM "{schema}".chatlab_conversations').fetchall())
    members = []
    for i in range(rng.randint(1, 12)):
        key = rng.choice(KEYS)
        count = rng.choice([0, 1, 1, 2, 3])
        current = versions.get(key, "0")
        guessed = f"{current.rsplit('.', 1)[0]}.{rng.randint(0, 6)}"
        if_match = rng.choice([None, None, [current], [guessed], ["*"], ["0"], ["stale"], [], ["stale", current]])
        idem = rng.choice([None, None, "i1", "i2", "i3"])
        fingerprint = rng.choice(["f1", "f2"])
        ttl = rng.choice([1000.0, 1000.0, 0.0005])  # a record that expires before the next member's now
        at = now + i * 0.001
        bodies = [f"r{round_}m{i}b{j}".encode() for j in range(count)]
        members.append(
            AppendMember(
                f"lock:{key}",
                key,
                at,
                bodies,
                f"g{round_}x{i}",
                at + 0.5,
                if_match,
                None if idem is None else Idempotency(idem, fingerprint, ttl),
                rng.choice([{}, {"Planner": 1}, {"Planner": 2, "Worker": 1}]) if count else {},
            )
        )
    return members


def test_a_batch_decides_as_its_members_one_at_a_time(postgres_url: str) -> None:
    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]
    one = f"{schema}_one"
    rng = random.Random(15)
    now = time.time()
    try:
        with _open(base, schema) as batched, _open(base, one) as single:
            _seed(batched, schema, now)
            _seed(single, one, now)
            outcomes = {"written": 0, "refused": 0, "replayed": 0}
            for round_ in range(40):
                now += 1.0
                members = _batch(rng, single, one, round_, now)
                [rows] = call_append_function(base, schema, [members])  # every member answered
                expected = [row for [row] in call_append_function(base, one, [[m] for m in members])]
                assert rows == expected, round_
                assert _state(batched, schema, now + 1) == _state(single, one, now + 1), round_
                for _, fingerprint, _, written in expected:
                    outcomes["written" if written else "replayed" if fingerprint else "refused"] += 1
            assert min(outcomes.values()) > 20, outcomes  # every kind of answer, many times
    finally:
        drop_postgres_schema(base, one)


def test_the_batch_function_s_generic_plans_read_through_indexes(postgres_url: str) -> None:
    """The function plans its statements once per session (generic plans: custom ones would be planned anew on each
    call), maybe while the tables are still empty: its reads and its purge of expired records must go
    through the indexes all the same, or they would scan the tables once large."""
    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    base = postgres_url.split("?", 1)[0]
    import asyncio

    import asyncpg

    from chatlab.stores.postgres.appends import append_many
    from chatlab.stores.postgres.statements import Statements

    _open(base, schema).close()
    plans: list[str] = []

    async def main() -> None:
        conn = await asyncpg.connect(base)
        try:
            conn.add_log_listener(lambda _, message: plans.append(message.message or ""))
            try:
                await conn.execute("LOAD 'auto_explain'")
            except Exception as exc:  # pragma: no cover - depends on the server's contrib modules
                pytest.skip(f"auto_explain is not available: {exc}")
            for setting in ["log_min_duration = 0", "log_nested_statements = on", "log_level = notice"]:
                await conn.execute(f"SET auto_explain.{setting}")
            members = [
                AppendMember(f"lock:k{i}", f"k{i}", 1e9, [b"m"], "g", 1e9, None, Idempotency(f"i{i}", "fp", 1e9))
                for i in range(3)
            ]
            await append_many(conn, Statements(schema).append, members)
        finally:
            await conn.close()

    asyncio.run(main())
    inner = [plan for plan in plans if "chatlab_idempotency" in plan and "Query Text: SELECT * FROM" not in plan]
    assert len(inner) == 2, plans  # the read, the write
    assert all("Seq Scan on chatlab_" not in plan for plan in inner), inner
    assert any("chatlab_idempotency_expiry" in plan for plan in inner), inner
