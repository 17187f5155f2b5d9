"""Redis Cluster: a primary killed under a write load; every acknowledged append survives its replica's failover.

The test starts a throwaway cluster of its own (3 primaries, 3 replicas, on free loopback ports, in a temporary
directory), so the shared cluster the contract tests use keeps all its nodes. It runs where the cluster tests run
(``CHATLAB_TEST_REDIS_CLUSTER_URL`` set; under ``CI=true`` it fails rather than skips without it).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chatlab.stores import StoreError, open_store
from chatlab.stores.base import Idempotency
from tests.missing import skip_or_fail
from tests.stores.conftest import server_url

KEYS = [f"conversation-{i}" for i in range(12)]


def _free(port: int) -> bool:
    for candidate in (port, port + 10000):  # the node's port and its cluster bus port
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                return False
    return True


def _ports(count: int) -> list[int]:
    while True:
        first = random.randrange(30000, 55000 - count)
        ports = list(range(first, first + count))
        if all(_free(port) for port in ports):
            return ports


def _cli(port: int, *args: str) -> str:
    result = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=30)
    return result.stdout


def _wait(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.1)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[int], dict[int, subprocess.Popen[bytes]]]]:
    server_url("redis-cluster")  # runs where the cluster tests run
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        skip_or_fail("the failover test needs redis-server and redis-cli (apt-get install redis-server)")
    ports = _ports(6)
    nodes: dict[int, subprocess.Popen[bytes]] = {}

    def start(port: int) -> None:
        directory = tmp_path / str(port)
        directory.mkdir(exist_ok=True)
        options = ["--cluster-enabled", "yes", "--cluster-node-timeout", "1000", "--repl-diskless-sync-delay", "0"]
        options += ["--save", "", "--appendonly", "no"]
        nodes[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), *options],
            stdout=subprocess.DEVNULL,
        )

    try:
        for port in ports:
            start(port)
        for port in ports:
            _wait(lambda port=port: _cli(port, "ping").strip() == "PONG", f"node {port} to start")
        addresses = [f"127.0.0.1:{port}" for port in ports]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for port in ports:
            _wait(lambda port=port: "cluster_state:ok" in _cli(port, "cluster", "info"), "the cluster to form")
        for port in ports:  # every replica in step with its primary (a failover needs a synchronized replica)
            _wait(
                lambda port=port: (
                    "role:master" in (info := _cli(port, "info", "replication")) or "master_link_status:up" in info
                ),
                "the replicas to synchronize",
            )
        yield ports, nodes
    finally:
        for process in nodes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()


def _primaries_with_replicas(port: int) -> list[int]:
    """The primaries (their ports) that a connected replica follows, as ``CLUSTER NODES`` on ``port`` says."""
    lines = [line.split() for line in _cli(port, "cluster", "nodes").splitlines() if line.strip()]
    by_id = {fields[0]: fields for fields in lines}
    followed = {fields[3] for fields in lines if "slave" in fields[2] and fields[7] == "connected"}
    return [
        int(by_id[node][1].split("@")[0].rsplit(":", 1)[1])
        for node in followed
        if node in by_id and "master" in by_id[node][2] and "fail" not in by_id[node][2]
    ]


def test_acknowledged_appends_survive_a_primary_failover(cluster) -> None:
    ports, nodes = cluster
    url = f"redis+cluster://127.0.0.1:{ports[0]}/?prefix=failover:"
    victim = next(port for port in _primaries_with_replicas(ports[0]) if port != ports[0])
    acknowledged: dict[str, list[int]] = {key: [] for key in KEYS}
    failures: list[str] = []

    async def main() -> None:
        store = open_store(url, timeout=2.0)
        stop = asyncio.Event()

        async def writer(key: str) -> None:
            n, unsure = 0, False
            # an append that failed may have been written (its answer lost): it is retried until acknowledged, also
            # after stop, so that every stored message is an acknowledged one
            while not stop.is_set() or unsure:
                message = b'{"role":"user","contents":[{"$type":"text","text":"%d"}]}' % n
                try:  # one idempotency key per message: a retry after a lost answer appends it once
                    await store.append(key, [message], idempotency=Idempotency(f"{key}-{n}", str(n)))
                except StoreError as exc:
                    failures.append(str(exc))
                    unsure = True
                    await asyncio.sleep(0.1)
                    continue
                unsure = False
                acknowledged[key].append(n)
                n += 1

        try:
            writers = [asyncio.ensure_future(writer(key)) for key in KEYS]
            await asyncio.sleep(1.0)
            assert all(acknowledged[key] for key in KEYS)
            os.kill(nodes[victim].pid, signal.SIGKILL)  # a crash: no shutdown, no last save
            await asyncio.to_thread(
                _wait,
                lambda: (
                    victim not in _primaries_with_replicas(ports[0])
                    and "cluster_state:ok" in _cli(ports[0], "cluster", "info")
                ),
                "a replica to take over",
            )
            before = {key: len(done) for key, done in acknowledged.items()}
            await asyncio.to_thread(
                _wait, lambda: all(len(acknowledged[key]) > before[key] + 5 for key in KEYS), "writes after failover"
            )
            stop.set()
            await asyncio.gather(*writers)
            for key in KEYS:
                stored = await store.get(key)
                expected = [b'{"role":"user","contents":[{"$type":"text","text":"%d"}]}' % n for n in acknowledged[key]]
                assert stored == expected, key  # every acknowledged append, once, in order
            assert {s.conversation_key for s in await store.summaries()} == set(KEYS)
        finally:
            await store.close()

    asyncio.run(main())
    assert failures, "the killed primary's conversations should have failed for a while"
