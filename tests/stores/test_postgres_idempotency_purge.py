"""The PostgreSQL append purges expired idempotency records a few at a time (``PURGE_BATCH`` per record it writes),
so the table, which holds a record per append of the last ``idempotency_ttl``, does not grow without bound. (That the
purge reads the expiry index, never the whole table, is checked with the append function's plans in
test_postgres_append_batch.py.)"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

from chatlab.stores import open_store
from chatlab.stores.base import Idempotency
from chatlab.stores.postgres.appends import PURGE_BATCH, AppendMember

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


def test_a_batch_purges_a_batch_of_expired_records_per_record_it_writes(postgres_url: str) -> None:
    """The append function purges per record written: a batch writing 3 records
    deletes up to 3 * PURGE_BATCH expired ones; its refused and keyless members purge nothing."""
    from tests.stores.store_helpers import call_append_function

    schema, base = _schema_and_base(postgres_url)
    _append(postgres_url, ["k0"])
    _insert_records(base, schema, 5 * PURGE_BATCH + 3, expires_at=0.0)
    members = [
        AppendMember(f"l{i}", f"c{i}", 1e9, [M], "g", 1e9, None, Idempotency(f"b{i}", "fp", 3e9)) for i in range(3)
    ]
    members += [AppendMember("l", "c9", 1e9, [M], "g", 1e9)]  # no key: writes no record
    refused = Idempotency("b9", "fp", 3e9)
    members += [AppendMember("l", "c9", 1e9, [M], "g", 1e9, ["stale"], refused)]  # refused: writes nothing
    call_append_function(base, schema, [members])
    assert _records(base, schema) == 1 + 2 * PURGE_BATCH + 3 + 3  # k0, what is left of the expired, b0 to b2
