"""The PostgreSQL append purges expired idempotency records a few at a time, through the expiry index: a generic
plan (what a prepared statement and a PL/pgSQL function run after five calls) must not scan the whole table, which
holds a record per append of the last ``idempotency_ttl``."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

from chatlab.stores import open_store
from chatlab.stores.base import Idempotency
from chatlab.stores.postgres_sql import PURGE_BATCH, build_queries

M = b'{"role":"user","contents":[]}'


def _schema_and_base(postgres_url: str) -> tuple[str, str]:
    return parse_qs(urlsplit(postgres_url).query)["schema"][0], postgres_url.split("?", 1)[0]


def _append(postgres_url: str, keys: list[str]) -> None:
    async def main() -> None:
        store = open_store(postgres_url)
        try:
            for key in keys:
                await store.append("c", [M], idempotency=Idempotency(key, "fp"))
        finally:
            await store.close()

    asyncio.run(main())


def _insert_records(base: str, schema: str, count: int, expires_at: float) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO \"{schema}\".chatlab_idempotency SELECT 'other', 'r' || i, 'fp', 'v.1', %s"
            " FROM generate_series(1, %s) AS i",
            (expires_at, count),
        )


def _records(base: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{schema}".chatlab_idempotency').fetchone()
        assert row is not None
        return int(row[0])


def test_each_append_purges_a_batch_of_expired_records(postgres_url: str) -> None:
    schema, base = _schema_and_base(postgres_url)
    _append(postgres_url, ["k0"])  # the tables
    _insert_records(base, schema, 5 * PURGE_BATCH + 3, expires_at=0.0)
    _append(postgres_url, ["k1"])
    assert _records(base, schema) == 1 + 4 * PURGE_BATCH + 3 + 1  # k0, what is left of the expired, k1
    _append(postgres_url, [f"k{i}" for i in range(2, 7)])
    assert _records(base, schema) == 7  # every expired record gone, k0 to k6 kept


def test_the_purge_uses_the_expiry_index_in_a_generic_plan(postgres_url: str) -> None:
    import psycopg

    schema, base = _schema_and_base(postgres_url)
    _append(postgres_url, ["k0"])
    _insert_records(base, schema, 20_000, expires_at=4e9)  # live records, as a day of appends leaves
    statement = build_queries(schema)["append_statement"]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'ANALYZE "{schema}".chatlab_idempotency')
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(
            "PREPARE a(text, text, float8, int4, bytea[], text, float8, text[], text, text, float8) AS " + statement
        )
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN EXECUTE a('l', 'c', 1e9, 1, ARRAY['\\x00'::bytea], 'g', 1e9, NULL, 'k', 'fp', 2e9)"
            )
        )
    assert "chatlab_idempotency_expiry" in plan
    assert "Seq Scan on chatlab_idempotency" not in plan, plan


def test_a_batch_purges_a_batch_of_expired_records_per_record_it_writes(postgres_url: str) -> None:
    """The batch append function purges as the single append does, per record written: a batch writing 3 records
    deletes up to 3 * PURGE_BATCH expired ones; its refused and keyless members purge nothing."""
    import psycopg

    from tests.stores.store_helpers import call_append_batch

    schema, base = _schema_and_base(postgres_url)
    _append(postgres_url, ["k0"])
    _insert_records(base, schema, 5 * PURGE_BATCH + 3, expires_at=0.0)
    members = [(f"l{i}", f"c{i}", 1e9, 1, [M], "g", 1e9, None, f"b{i}", "fp", 4e9) for i in range(3)]
    members += [("l", "c9", 1e9, 1, [M], "g", 1e9, None, None, None, None)]  # no key: writes no record
    members += [("l", "c9", 1e9, 1, [M], "g", 1e9, ["stale"], "b9", "fp", 4e9)]  # refused: writes nothing
    with psycopg.connect(base, autocommit=True) as conn:
        call_append_batch(conn, build_queries(schema)["append_batch"], members)
    assert _records(base, schema) == 1 + 2 * PURGE_BATCH + 3 + 3  # k0, what is left of the expired, b0 to b2
