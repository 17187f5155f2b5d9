"""The benchmark's database paths (isolation, storage measurement, clean-up) run against the real servers.

tests/test_bench.py covers the tables with memory and SQLite; this runs the same quick benchmark on
PostgreSQL and Redis, whose helpers talk to the servers directly (the store alone's rows among them), and
checks it leaves nothing behind.
"""

from __future__ import annotations

import pytest

from tests.test_bench import assert_store_alone_rows, quick_bench


def _leftovers(store: str, url: str, pid: int) -> list[str]:
    """Schemas or keys that the benchmark process ``pid`` created (chatlab_bench_<pid>_...) and left behind.

    Only its own: another benchmark may share the server meanwhile."""
    pattern = f"chatlab_bench_{pid}_"
    if store == "postgresql":
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (pattern + "%",)).fetchall()
        return [name for (name,) in rows]
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        return [key.decode() for key in client.scan_iter(match=pattern + "*", count=1000)]
    finally:
        client.close()


@pytest.mark.parametrize("store,backend", [("postgresql", "postgres"), ("redis", "redis")])
def test_quick_bench_on_a_database_store(store: str, backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(f"{backend}_server")
    variable = "CHATLAB_TEST_POSTGRES_URL" if store == "postgresql" else "CHATLAB_TEST_REDIS_URL"
    out, pid = quick_bench(store, **{variable: url})
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert [store, "read"] in [r[:2] for r in rows] and [store, "append"] in [r[:2] for r in rows], out.stdout
    storage = [r for r in rows if r[:1] == [store] and len(r) > 3 and all(c.replace(",", "").isdigit() for c in r[1:3])]
    assert storage and int(storage[0][1].replace(",", "")) > 0, out.stdout
    assert_store_alone_rows(out.stdout, store)
    assert _leftovers(store, url, pid) == [], "the benchmark left its schema or keys behind"
