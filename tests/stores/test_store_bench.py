"""The benchmark's database parts against the real servers: the PostgreSQL and Redis baselines serve the
service's paths, and the run's isolated places are removed afterwards."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import add_arguments, config_from_args
from benchmarks.baselines import baseline_app
from benchmarks.targets import store_targets
from chatlab.runner import BackgroundServer
from chatlab.stores import open_store
from tests.test_bench import check_baseline


def leftovers(store: str, url: str, name: str) -> list[str]:
    """Schemas or keys whose names start with ``name``."""
    if store == "postgresql":
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (name + "%",)).fetchall()
        return [found for (found,) in rows]
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        return [key.decode() for key in client.scan_iter(match=name + "*", count=1000)]
    finally:
        client.close()


@pytest.mark.parametrize("store,backend", [("postgresql", "postgres"), ("redis", "redis")])
def test_the_baseline_serves_and_the_run_leaves_nothing_behind(
    store: str, backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server_url = request.getfixturevalue(f"{backend}_server")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args(["--stores", store, f"--{backend}-url", server_url]))
    with store_targets(config, tmp_path) as targets:
        [target] = targets
        assert target.name == store and target.url != target.baseline_url
        with BackgroundServer(baseline_app(store, target.baseline_url), name=f"baseline-{store}").start() as server:
            check_baseline(server.url)

        async def write_through_chatlab() -> None:
            chatlab = open_store(target.url)
            try:
                await chatlab.append("bench-k", [b'{"role":"user","contents":[]}'])
            finally:
                await chatlab.close()

        import asyncio

        asyncio.run(write_through_chatlab())
        name = target.url.split("=")[-1].rstrip(":").replace("%3A", "")
        assert leftovers(store, server_url, name)  # both places were written
    assert leftovers(store, server_url, name) == [], "the benchmark left its schema or keys behind"
