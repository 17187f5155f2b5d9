"""How long a ``GET /`` waits while the worst body the default limits allow is being written.

One request may carry 8 MiB (``--max-body-bytes``) of about 500,000 tiny content items. Parsing,
checking and encoding it costs the service CPU; done on the event loop, every other request waited
for it (seconds). This starts the service as ``chatlab serve`` does (its own process, the default
limits, the in-memory store), times ``GET /`` alone, then again while a client ``PUT``s that body
over and over, and prints the two: p50, p99 and the longest wait.

    python -m chatlab.bench.stall [--quick]

Nothing is asserted: the machine may be shared, the figures are printed for a person to read.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import httpx

#: ``--max-body-bytes``' default, given to the server explicitly so the environment cannot change it.
MAX_BODY_BYTES = 8 * 1024 * 1024
_ITEM = b'{"$type":"text"}'
_PROBE_INTERVAL = 0.005


def worst_body(max_body_bytes: int = MAX_BODY_BYTES) -> tuple[bytes, int]:
    """The largest body within ``max_body_bytes``: one message of as many content items as fit, and how many."""
    head, tail = b'{"messages":[{"role":"user","contents":[', b"]}]}"
    count = (max_body_bytes - len(head) - len(tail) + 1) // (len(_ITEM) + 1)
    return head + b",".join([_ITEM] * count) + tail, count


@dataclass
class Latencies:
    """``GET /`` round trips, in seconds."""

    seconds: list[float]

    def row(self, label: str, note: str = "") -> str:
        ms = sorted(s * 1000 for s in self.seconds)
        p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
        return f"{label:<18}{statistics.median(ms):>8.2f}{p99:>9.2f}{ms[-1]:>9.2f}{len(ms):>10,}  {note}".rstrip()


class _Service:
    """``python -m chatlab serve`` on a free loopback port, its defaults untouched by this environment."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLAB_")}
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - the server's log, open while it runs; stop() closes it
        args = ["serve", "--port", str(self.port), "--max-body-bytes", str(MAX_BODY_BYTES), "--log-level", "warning"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chatlab", *args], stdout=subprocess.DEVNULL, stderr=self._log, env=env
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                httpx.get(self.url + "/", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        self._log.seek(0)
        raise RuntimeError(f"chatlab serve did not start: {self._log.read().decode(errors='replace')[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def _probe(client: httpx.Client, until: threading.Event | None, count: int) -> Latencies:
    """Time ``GET /`` every few milliseconds: ``count`` times, or until ``until`` is set."""
    seconds: list[float] = []
    while (until is None and len(seconds) < count) or (until is not None and not until.is_set()):
        start = time.perf_counter()
        client.get("/").raise_for_status()
        seconds.append(time.perf_counter() - start)
        time.sleep(_PROBE_INTERVAL)
    return Latencies(seconds)


def _write(url: str, body: bytes, writes: int, done: threading.Event, took: list[float]) -> None:
    """``PUT`` the body ``writes`` times, one after the other, then set ``done``."""
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            for _ in range(writes):
                start = time.perf_counter()
                response = client.put("/chat-history/stall", content=body, headers={"content-type": "application/json"})
                response.raise_for_status()
                took.append(time.perf_counter() - start)
    finally:
        done.set()


def measure(quick: bool) -> tuple[Latencies, Latencies, int, int, list[float]]:
    """``GET /`` alone and under the worst writes; the body's size and items, and how long each write took."""
    took: list[float]
    body, items = worst_body()
    service = _Service()
    try:
        service.wait_ready()
        with httpx.Client(base_url=service.url, timeout=60) as client:
            alone = _probe(client, None, 100 if quick else 500)
            done, took = threading.Event(), []  # seconds per write
            writer = threading.Thread(target=_write, args=(service.url, body, 2 if quick else 10, done, took))
            writer.start()
            loaded = _probe(client, done, 0)
            writer.join()
    finally:
        service.stop()
    return alone, loaded, len(body), items, took


def bench_stall(quick: bool) -> None:
    """Measure and print the table (the benchmark's last part)."""
    alone, loaded, size, items, took = measure(quick)
    print(
        f"\nLoop stall: GET / alone, then while PUTs of the worst body the default limits allow ({size:,} bytes: "
        f"one message of {items:,} content items) follow one another; chatlab serve, in-memory store",
        flush=True,
    )
    print(f"{'':<18}{'p50 ms':>8}{'p99 ms':>9}{'max ms':>9}{'requests':>10}", flush=True)
    print(alone.row("GET / alone"), flush=True)
    each = f"{statistics.median(took):.2f} s" if took else "n/a"
    print(loaded.row("GET / under load", f"({len(took)} writes of {each} each)"), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chatlab.bench.stall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 writes instead of 10")
    bench_stall(parser.parse_args(argv).quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
