"""Load generators: ``wrk`` in its own process when installed, else a small asyncio client in this one.

Both keep 16 (``--connections``) HTTP/1.1 connections alive and send one request after another
on each; ``wrk`` reads its path, body and key spread from a Lua script. An append (a request with
a body) carries an ``Idempotency-Key`` of its own, as the provider's appends do.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LoadResult:
    """One load run: requests per second, latency percentiles, and how many answers were not 2xx."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


_WRK_SCRIPT = r"""
local body_path = os.getenv("CHATLAB_BENCH_BODY") or ""
local keys = tonumber(os.getenv("CHATLAB_BENCH_KEYS") or "1")
local path = os.getenv("CHATLAB_BENCH_PATH")
local run = os.getenv("CHATLAB_BENCH_RUN")
local counter = 0
if body_path ~= "" then
  local f = assert(io.open(body_path, "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end
request = function()
  counter = counter + 1
  local target = path
  if keys > 1 then
    target = path .. "-" .. (counter % keys)
  end
  if body_path ~= "" then
    -- as the provider: every append carries an Idempotency-Key of its own
    -- (a headers table replaces wrk.headers, so it names the content type again)
    local headers = {["Content-Type"] = "application/json", ["Idempotency-Key"] = '"' .. run .. "-" .. counter .. '"'}
    return wrk.format(nil, target, headers)
  end
  return wrk.format(nil, target)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("CHATLAB-RESULT %d %d %d %.1f %.1f\n", summary.duration, summary.requests,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50), latency:percentile(99)))
end
"""


class Wrk:
    """``wrk`` with one thread; the request body and path come from a Lua script."""

    def __init__(self, connections: int) -> None:
        path = shutil.which("wrk")
        if path is None:
            raise FileNotFoundError("wrk is not installed")
        self.path = path
        self.connections = connections
        self._dir = tempfile.TemporaryDirectory(prefix="chatlab-bench-")
        self.script = Path(self._dir.name) / "chatlab.lua"
        self.script.write_text(_WRK_SCRIPT)
        version = subprocess.run([self.path, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        self.name = f"wrk ({version.split(' [')[0].strip() or 'wrk'}; 1 thread, {connections} connections, own process)"

    def run(self, base: str, path: str, body: Path | None, seconds: float, keys: int = 1) -> LoadResult:
        """Load ``base`` for ``seconds``: ``GET path``, or (``body``) ``POST`` it, to ``path-0`` to ``path-N`` in turn
        when ``keys`` is N + 1 > 1."""
        env = {**os.environ, "CHATLAB_BENCH_PATH": path, "CHATLAB_BENCH_KEYS": str(keys)}
        env["CHATLAB_BENCH_RUN"] = uuid.uuid4().hex
        env["CHATLAB_BENCH_BODY"] = str(body) if body else ""
        duration = max(1, round(seconds))
        cmd = [
            self.path,
            "-t1",
            f"-c{self.connections}",
            f"-d{duration}s",
            "--timeout",
            "10s",
            "-s",
            str(self.script),
            base,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration + 60)
        for line in out.stdout.splitlines():
            if line.startswith("CHATLAB-RESULT "):
                micros, requests, errors, p50, p99 = line.split()[1:]
                return LoadResult(
                    int(requests) / (int(micros) / 1e6),
                    float(p50) / 1000,
                    float(p99) / 1000,
                    int(requests),
                    int(errors),
                )
        raise RuntimeError(f"wrk printed no result (exit {out.returncode}): {out.stdout[-500:]} {out.stderr[-500:]}")

    def close(self) -> None:
        """Release what the generator holds."""
        self._dir.cleanup()


class PythonLoad:
    """A fallback load generator: keep-alive HTTP/1.1 over asyncio streams, in this process."""

    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.name = (
            f"python asyncio client ({connections} connections, in the bench process: it shares the CPU with "
            "the server, so figures are low; install wrk for real ones)"
        )

    def run(self, base: str, path: str, body: Path | None, seconds: float, keys: int = 1) -> LoadResult:
        """Load ``base`` for ``seconds``: ``GET path``, or (``body``) ``POST`` it, to ``path-0`` to ``path-N`` in turn
        when ``keys`` is N + 1 > 1."""
        return asyncio.run(self._run(base, path, body.read_bytes() if body else None, seconds, keys))

    async def _run(self, base: str, path: str, body: bytes | None, seconds: float, keys: int) -> LoadResult:
        host, port = base.removeprefix("http://").split(":")
        latencies: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds
        counter = 0
        run = uuid.uuid4().hex

        def request_bytes() -> bytes:
            nonlocal counter
            counter += 1
            target = f"{path}-{counter % keys}" if keys > 1 else path
            if body is None:
                return f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
            head = f"POST {target} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            head += f'Idempotency-Key: "{run}-{counter}"\r\n'
            return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body

        async def worker() -> None:
            nonlocal errors
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                while time.perf_counter() < deadline:
                    start = time.perf_counter()
                    writer.write(request_bytes())
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    if length:
                        await reader.readexactly(length)
                    latencies.append(time.perf_counter() - start)
                    if not head.startswith((b"HTTP/1.1 2", b"HTTP/1.0 2")):
                        errors += 1
            finally:
                writer.close()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(self.connections)))
        elapsed = time.perf_counter() - started
        latencies.sort()
        return LoadResult(
            len(latencies) / elapsed, _pct(latencies, 50) * 1000, _pct(latencies, 99) * 1000, len(latencies), errors
        )

    def close(self) -> None:
        """Release what the generator holds."""
        pass


def _pct(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * pct / 100))]


def load_generator(kind: str, connections: int) -> Wrk | PythonLoad:
    """``wrk`` for ``auto`` when installed (``wrk``: or fail), else the Python client."""
    if kind in ("auto", "wrk"):
        try:
            return Wrk(connections)
        except FileNotFoundError:
            if kind == "wrk":
                raise
    return PythonLoad(connections)


LoadGenerator = Wrk | PythonLoad


def median_run(runs: Sequence[LoadResult]) -> LoadResult:
    """The run of median throughput."""
    ordered = sorted(runs, key=lambda r: r.rps)
    return ordered[len(ordered) // 2]
