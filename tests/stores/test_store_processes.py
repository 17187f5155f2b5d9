"""Service processes (``python -m chatlab serve --store URL``): replicas sharing a store, and a kill -9."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from store_helpers import batch, batches_present, check_batches, run_writers

from tests.summaries import article

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """One ``python -m chatlab serve`` process on a free loopback port, its output in a log file."""

    def __init__(self, store_url: str, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "chatlab", "serve", "--store", store_url, "--port", str(self.port),
                 "--log-level", "warning"],
                cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_ready(self, timeout: float = 30.0) -> Service:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/chat-history", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"service did not start on {self.url}:\n{self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


@pytest.fixture
def services(tmp_path) -> Iterator:
    """Start services with ``services(store_url)``; every one is killed at the end of the test."""
    started: list[Service] = []

    def start(store_url: str) -> Service:
        service = Service(store_url, tmp_path / f"serve-{len(started)}.log")
        started.append(service)
        return service.wait_ready()

    yield start
    for service in started:
        service.stop()


def _post(client: httpx.Client, url: str, w: int, b: int, size: int) -> int:
    body = {"messages": [json.loads(m) for m in batch(w, b, size)]}
    return client.post(f"{url}/chat-history/shared", json=body).status_code


def _read(url: str) -> tuple[list[bytes], list]:
    with httpx.Client(timeout=30) as client:
        messages = client.get(f"{url}/chat-history/shared").json()
        summaries = client.get(f"{url}/chat-history").json()
    return [json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode() for m in messages], summaries


@pytest.mark.parametrize("backend", ["postgres", "redis", "sqlite"])
def test_two_service_processes_share_one_store(services, store_url: str):
    """Writers alternate between two replicas on one store; no batch is lost, split or interleaved."""
    replicas = [services(store_url), services(store_url)]
    writers, batches = 6, 12
    expected = {(w, b): (w * 7 + b) % 5 + 1 for w in range(writers) for b in range(batches)}

    def writer(w: int) -> None:
        with httpx.Client(timeout=30) as client:
            for b in range(batches):
                assert _post(client, replicas[(w + b) % 2].url, w, b, expected[(w, b)]) == 202

    run_writers(writer, writers)

    first, second = _read(replicas[0].url), _read(replicas[1].url)
    assert first == second
    messages, summaries = first
    check_batches(messages, expected)
    assert article(summaries) == [{"conversationKey": "shared", "messageCount": sum(expected.values())}]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_kill_9_during_writes_loses_no_acknowledged_batch(services, store_url: str):
    """SIGKILL the SQLite-backed service while writers are busy; after a restart every batch
    that was answered 202 is there, and nothing is partial."""
    service = services(store_url)
    acknowledged: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    enough = threading.Event()
    writers, want_before_kill = 4, 120

    def writer(w: int) -> None:
        with httpx.Client(timeout=30) as client:
            for b in range(100_000):  # ends at the kill
                size = (w + b) % 5 + 1
                try:
                    status = _post(client, service.url, w, b, size)
                except httpx.TransportError:
                    return  # the service is gone: this batch was never acknowledged
                assert status == 202
                with lock:
                    acknowledged[(w, b)] = size
                    if len(acknowledged) >= want_before_kill:
                        enough.set()

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
    for t in threads:
        t.start()
    assert enough.wait(120), "the writers did not get going"
    os.kill(service.process.pid, signal.SIGKILL)  # writers are mid-request now
    service.process.wait(30)
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert service.process.returncode == -signal.SIGKILL

    messages, summaries = _read(services(store_url).url)
    present = batches_present(messages)
    check_batches(messages, present)  # every batch whole, once, in order
    assert acknowledged.items() <= present.items(), sorted(set(acknowledged) - set(present))
    print(f"acknowledged {len(acknowledged)}, present {len(present)}")
    assert len(present) - len(acknowledged) <= writers  # at most the batch each writer had in flight
    assert article(summaries) == [{"conversationKey": "shared", "messageCount": len(messages)}]
