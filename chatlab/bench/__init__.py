"""``python -m chatlab bench``: how fast the service and the provider are, next to their ceiling.

One run prints, for each store available (memory, SQLite, and PostgreSQL / Redis when
their URLs are given):

1. **HTTP**: requests per second and p50/p99 latency of reading a 20-message conversation
   and of appending a 4-message batch, side by side with a bare FastAPI/uvicorn app that
   answers the same paths with the same bytes (read) or reads the same body and answers 202
   (append) without doing anything else: the *ceiling*. The ratio is service / ceiling.
   Each server runs in a process of its own with the same uvicorn settings; the load
   generator is ``wrk`` when installed (one thread, keep-alive connections), otherwise a
   small asyncio client in this process, which then competes with the server for the CPU
   and says so.
2. **Provider**: the time and HTTP bytes (bodies + headers) of one agent turn as the
   provider sees it (load the history before the run, append 4 messages after it) at
   history lengths 10, 1,000 and 10,000, with the incremental cache and with full loads.
3. **Storage per message**: the in-memory store's Python heap per stored message
   (``tracemalloc``) against the message's JSON size; for the database stores, how much
   the database grows per message.

``--quick`` is the CI mode: short runs, few turns; it never fails because a figure is
slow (it prints them), only when the benchmark itself breaks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .stall import bench_stall

READ_MESSAGES = 20
APPEND_MESSAGES = 4
APPEND_KEYS = 64  # the append load spreads over this many conversations, as many sessions would
INCREMENTAL_TURNS_FACTOR = 4
GOAL_READ = 0.8
GOAL_APPEND = 0.6
GOAL_TURN = 1.5
GOAL_MEMORY = 2.0


# -- the messages ------------------------------------------------------------------------------


def sample_turn(i: int) -> list[dict[str, Any]]:
    """One turn of the article's scenario as MEAI ChatMessage JSON: question, tool call, result, answer."""
    stamp = f"2026-04-16T01:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
    return [
        {
            "role": "user",
            "contents": [{"$type": "text", "text": f"現在時刻を教えてください (turn {i})"}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-0",
        },
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "functionCall", "callId": f"call_{i}", "name": "GetDateTime", "arguments": {}}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-1",
        },
        {
            "role": "tool",
            "contents": [{"$type": "functionResult", "callId": f"call_{i}", "result": "2026-04-16 01:30:52"}],
            "messageId": f"msg-{i}-2",
        },
        {
            "authorName": "SampleAgent",
            "role": "assistant",
            "contents": [{"$type": "text", "text": "現在の日時は **2026-04-16 01:30:52** です。"}],
            "createdAt": stamp,
            "messageId": f"msg-{i}-3",
        },
    ]


def sample_messages(count: int, start: int = 0) -> list[dict[str, Any]]:
    """``count`` messages of consecutive sample turns (the last turn may be cut short)."""
    out: list[dict[str, Any]] = []
    turn = start
    while len(out) < count:
        out.extend(sample_turn(turn))
        turn += 1
    return out[:count]


def _body(messages: Sequence[dict[str, Any]]) -> bytes:
    return json.dumps({"messages": list(messages)}, ensure_ascii=False, separators=(",", ":")).encode()


# -- servers in processes of their own -----------------------------------------------------------


def _serve_child(argv: Sequence[str]) -> None:
    """Entry point of a server process: ``--target service|ceiling [--store URL] [--read-body FILE]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", choices=["service", "ceiling"], required=True)
    parser.add_argument("--store", default=None)
    parser.add_argument("--read-body", default=None)
    args = parser.parse_args(argv)
    import uvicorn

    if args.target == "service":
        from ..service import ServiceSettings, create_app

        # the article's open service, whatever the environment says (API keys or a rate limit would change what
        # is measured, and the load generator sends no key)
        app = create_app(args.store, ServiceSettings(api_keys=None, rate_limit=None, cors_origins=()))
    else:
        from .ceiling import ceiling_app

        app = ceiling_app(Path(args.read_body).read_bytes())
    # IPPROTO_TCP, so that asyncio sets TCP_NODELAY on accepted connections, as uvicorn.run's own sockets get
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


class ServerProcess:
    """A service or ceiling server in a child process, on a free loopback port."""

    def __init__(self, target: str, *, store: str | None = None, read_body: Path | None = None) -> None:
        self.target = target
        args = [sys.executable, "-m", "chatlab.bench", "--serve-child", "--target", target]
        if store is not None:
            args += ["--store", store]
        if read_body is not None:
            args += ["--read-body", str(read_body)]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            err = self.process.stderr.read() if self.process.stderr else ""
            self.stop()
            raise RuntimeError(f"the {target} server did not start: {line.strip()} {err.strip()[-2000:]}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the {target} server is not answering at {self.url}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream:
                stream.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- load generators -----------------------------------------------------------------------------


@dataclass
class LoadResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


_WRK_SCRIPT = r"""
local body_path = os.getenv("CHATLAB_BENCH_BODY") or ""
local keys = tonumber(os.getenv("CHATLAB_BENCH_KEYS") or "1")
local path = os.getenv("CHATLAB_BENCH_PATH")
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
  if keys > 1 then
    return wrk.format(nil, path .. "-" .. (counter % keys))
  end
  return wrk.format(nil, path)
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
        env = {**os.environ, "CHATLAB_BENCH_PATH": path, "CHATLAB_BENCH_KEYS": str(keys)}
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
        return asyncio.run(self._run(base, path, body.read_bytes() if body else None, seconds, keys))

    async def _run(self, base: str, path: str, body: bytes | None, seconds: float, keys: int) -> LoadResult:
        host, port = base.removeprefix("http://").split(":")
        latencies: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds
        counter = 0

        def request_bytes() -> bytes:
            nonlocal counter
            counter += 1
            target = f"{path}-{counter % keys}" if keys > 1 else path
            if body is None:
                return f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
            head = f"POST {target} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
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
        pass


def _pct(sorted_values: Sequence[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * pct / 100))]


def load_generator(kind: str, connections: int) -> Wrk | PythonLoad:
    if kind in ("auto", "wrk"):
        try:
            return Wrk(connections)
        except FileNotFoundError:
            if kind == "wrk":
                raise
    return PythonLoad(connections)


# -- the benchmark -------------------------------------------------------------------------------


@dataclass
class BenchConfig:
    quick: bool = False
    seconds: float = 5.0
    repeats: int = 3
    connections: int = 16
    lengths: tuple[int, ...] = (10, 1_000, 10_000)
    turns: int = 20
    memory_messages: int = 20_000
    stores: tuple[str, ...] = ("memory", "sqlite", "postgresql", "redis")
    postgres_url: str | None = None
    redis_url: str | None = None
    load: str = "auto"

    @classmethod
    def quick_mode(cls, **overrides: Any) -> BenchConfig:
        values: dict[str, Any] = {"quick": True, "seconds": 1.0, "repeats": 1, "turns": 2, "memory_messages": 4_000}
        values.update(overrides)
        return cls(**values)


@dataclass
class StoreTarget:
    name: str
    url: str
    cleanup: list[Any] = field(default_factory=list)


@dataclass
class HttpRow:
    store: str
    op: str
    service: LoadResult
    ceiling: LoadResult
    #: service/ceiling of each pair of runs made back to back (the machine's noise hits both alike)
    pair_ratios: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        if self.pair_ratios:
            return statistics.median(self.pair_ratios)
        return self.service.rps / self.ceiling.rps if self.ceiling.rps else float("nan")


@dataclass
class TurnRow:
    store: str
    length: int
    mode: str
    ms: float
    bytes: int


@dataclass
class StorageRow:
    store: str
    per_message: float
    json_per_message: float
    what: str

    @property
    def ratio(self) -> float:
        return self.per_message / self.json_per_message


def _print(*parts: Any) -> None:
    print(*parts, flush=True)


@contextlib.contextmanager
def _targets(config: BenchConfig, tmp: Path) -> Iterator[list[StoreTarget]]:
    """The stores to measure, each isolated (own file, schema or key prefix) and removed afterwards."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    def with_query(url: str, **params: str) -> str:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
        return urlunsplit(parts._replace(query=urlencode(query)))

    name = f"chatlab_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    targets: list[StoreTarget] = []
    for store in config.stores:
        if store == "memory":
            targets.append(StoreTarget("memory", "memory://"))
        elif store == "sqlite":
            targets.append(StoreTarget("sqlite", f"sqlite:///{tmp / 'bench.db'}"))
        elif store == "postgresql" and config.postgres_url:
            target = StoreTarget("postgresql", with_query(config.postgres_url, schema=name))
            target.cleanup.append(lambda base=config.postgres_url: _drop_postgres(base, name))
            targets.append(target)
        elif store == "redis" and config.redis_url:
            target = StoreTarget("redis", with_query(config.redis_url, prefix=name + ":"))
            target.cleanup.append(lambda base=config.redis_url: _drop_redis(base, name + ":"))
            targets.append(target)
    try:
        yield targets
    finally:
        for target in targets:
            for clean in target.cleanup:
                with contextlib.suppress(Exception):
                    clean()


def _drop_postgres(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    from ..stores._urls import split_url
    from ..stores.postgres import CHATLAB_PARAMETERS

    with psycopg.connect(split_url(url, CHATLAB_PARAMETERS)[0], autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _drop_redis(url: str, prefix: str) -> None:
    import redis

    from ..stores._urls import split_url
    from ..stores.redis import CHATLAB_PARAMETERS

    client = redis.Redis.from_url(split_url(url, CHATLAB_PARAMETERS)[0], socket_timeout=5)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
    finally:
        client.close()


def _median_run(runs: list[LoadResult]) -> LoadResult:
    ordered = sorted(runs, key=lambda r: r.rps)
    return ordered[len(ordered) // 2]


def _warm_up(url: str, path: str, body: bytes | None) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        for i in range(30):
            if body is None:
                client.get(path).raise_for_status()
            else:
                client.post(
                    f"{path}-{i % APPEND_KEYS}", content=body, headers={"content-type": "application/json"}
                ).raise_for_status()


def bench_http(config: BenchConfig, targets: list[StoreTarget], tmp: Path, gen: Wrk | PythonLoad) -> list[HttpRow]:
    read_body_messages = sample_messages(READ_MESSAGES)
    append_file = tmp / "append.json"
    append_file.write_bytes(_body(sample_messages(APPEND_MESSAGES, start=1000)))
    rows: list[HttpRow] = []
    read_bytes: bytes | None = None
    ceiling: ServerProcess | None = None
    ceiling_runs: dict[str, list[LoadResult]] = {"read": [], "append": []}
    try:
        for target in targets:
            with ServerProcess("service", store=target.url) as service:
                httpx.post(
                    f"{service.url}/chat-history/bench-read",
                    content=_body(read_body_messages),
                    headers={"content-type": "application/json"},
                    timeout=30,
                ).raise_for_status()
                got = httpx.get(f"{service.url}/chat-history/bench-read", timeout=30)
                got.raise_for_status()
                if read_bytes is None:
                    read_bytes = got.content
                    (tmp / "read.json").write_bytes(read_bytes)
                    ceiling = ServerProcess("ceiling", read_body=tmp / "read.json")
                assert ceiling is not None
                for op, path, body, keys in (
                    ("read", "/chat-history/bench-read", None, 1),
                    ("append", "/chat-history/bench-append", append_file, APPEND_KEYS),
                ):
                    raw = append_file.read_bytes() if body else None
                    _warm_up(service.url, path, raw)
                    if not (config.quick and ceiling_runs[op]):
                        _warm_up(ceiling.url, path, raw)
                    service_runs: list[LoadResult] = []
                    pairs: list[float] = []
                    # in pairs, back to back and in alternating order, so that a noisy moment of the machine
                    # hits both sides alike; the ratio is the median of the pairs' ratios
                    for repeat in range(config.repeats):
                        if config.quick and ceiling_runs[op]:  # quick: one ceiling run per operation
                            service_runs.append(gen.run(service.url, path, body, config.seconds, keys))
                            continue
                        first, second = (ceiling, service) if repeat % 2 == 0 else (service, ceiling)
                        runs = {s: gen.run(s.url, path, body, config.seconds, keys) for s in (first, second)}
                        ceiling_runs[op].append(runs[ceiling])
                        service_runs.append(runs[service])
                        pairs.append(runs[service].rps / runs[ceiling].rps if runs[ceiling].rps else float("nan"))
                    row = HttpRow(target.name, op, _median_run(service_runs), _median_run(ceiling_runs[op]), pairs)
                    rows.append(row)
                    _print_http_row(row)
    finally:
        if ceiling is not None:
            ceiling.stop()
    return rows


def _print_http_header(read_size: int, append_size: int) -> None:
    _print(
        f"\nHTTP: read = GET of a {READ_MESSAGES}-message conversation ({read_size:,} bytes); "
        f"append = POST of a {APPEND_MESSAGES}-message batch ({append_size:,} bytes) "
        f"to {APPEND_KEYS} conversations in turn"
    )
    _print(
        f"{'store':<11} {'op':<7} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} | "
        f"{'ceiling':>8} {'p50 ms':>7} {'p99 ms':>7} | {'ratio':>5}  goal"
    )


def _print_http_row(row: HttpRow) -> None:
    goal = GOAL_READ if row.op == "read" else GOAL_APPEND
    s, c = row.service, row.ceiling
    errors = f"  ({s.errors} errors)" if s.errors else ""
    met = "met" if row.ratio >= goal else "NOT met"
    _print(
        f"{row.store:<11} {row.op:<7} {s.rps:>8,.0f} {s.p50_ms:>7.2f} {s.p99_ms:>7.2f} | "
        f"{c.rps:>8,.0f} {c.p50_ms:>7.2f} {c.p99_ms:>7.2f} | {row.ratio:>5.2f}  >= {goal} {met}{errors}"
    )


class _CountingTransport(httpx.AsyncBaseTransport):
    """Counts the HTTP bytes of requests and responses (bodies + start lines + headers)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bytes = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        self.bytes += (
            len(request.content) + _header_bytes(request.headers) + len(request.method) + len(request.url.raw_path) + 12
        )
        self.bytes += len(content) + _header_bytes(response.headers) + 17 + len(response.reason_phrase or "")
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=content,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _header_bytes(headers: httpx.Headers) -> int:
    return sum(len(k) + len(v) + 4 for k, v in headers.raw) + 2


async def _fill(client: httpx.AsyncClient, url: str, key: str, count: int) -> None:
    done = 0
    while done < count:
        n = min(1_000, count - done)
        batch = sample_messages(n, start=done // 4 + 10_000)
        response = await client.post(
            f"{url}/chat-history/{key}", content=_body(batch), headers={"content-type": "application/json"}
        )
        response.raise_for_status()
        done += n


async def _turns(url: str, length: int, turns: int) -> dict[str, tuple[float, int]]:
    """Per mode (incremental, full): the median time and bytes of a turn on a conversation of ``length`` messages."""
    from ..client.codec import messages_from_meai
    from ..client.provider import KEY_FIELD, RemoteChatHistoryProvider

    transport = _CountingTransport()
    results: dict[str, tuple[float, int]] = {}
    async with httpx.AsyncClient(transport=transport, timeout=120) as client:
        for mode in ("incremental", "full"):
            key = f"bench-turns-{length}-{mode}-{uuid.uuid4().hex[:8]}"  # each mode starts from `length` messages
            await _fill(client, url, key, length)
            stored = length
            provider = RemoteChatHistoryProvider(url, http_client=client, incremental=mode == "incremental")
            state = {KEY_FIELD: key}
            await provider.get_messages(None, state=state)  # the session's first run loads everything once
            times: list[float] = []
            sizes: list[int] = []
            # incremental turns are cheap: take more of them, for a steadier median on a noisy machine
            for t in range(turns * INCREMENTAL_TURNS_FACTOR if mode == "incremental" else turns):
                new = messages_from_meai(sample_turn(50_000 + t))
                gc.collect()
                transport.bytes = 0
                start = time.perf_counter()
                history = await provider.get_messages(None, state=state)
                await provider.save_messages(None, new, state=state)
                times.append(time.perf_counter() - start)
                sizes.append(transport.bytes)
                if len(history) != stored:
                    raise RuntimeError(f"the provider loaded {len(history)} messages, expected {stored}")
                stored += len(new)
            await provider.aclose()
            results[mode] = (statistics.median(times) * 1000, int(statistics.median(sizes)))
    return results


def bench_provider(config: BenchConfig, targets: list[StoreTarget]) -> list[TurnRow]:
    _print(
        f"\nProvider: one turn = load the history before the run + append {APPEND_MESSAGES} messages after it "
        f"(median of {config.turns * INCREMENTAL_TURNS_FACTOR} incremental / {config.turns} full turns "
        f"after the session's first load; each turn adds {APPEND_MESSAGES} messages to the history; "
        "bytes = HTTP bodies + headers both ways)"
    )
    _print(f"{'store':<11} {'history':>8} {'mode':<12} {'ms/turn':>9} {'bytes/turn':>11} {'vs 10':>6}")
    rows: list[TurnRow] = []
    for target in targets:
        with ServerProcess("service", store=target.url) as service:
            base: dict[str, float] = {}
            for length in config.lengths:
                for mode, (ms, size) in asyncio.run(_turns(service.url, length, config.turns)).items():
                    row = TurnRow(target.name, length, mode, ms, size)
                    rows.append(row)
                    base.setdefault(mode, ms)
                    _print(f"{target.name:<11} {length:>8,} {mode:<12} {ms:>9.2f} {size:>11,} {ms / base[mode]:>5.1f}x")
    return rows


def bench_storage(config: BenchConfig, targets: list[StoreTarget], tmp: Path) -> list[StorageRow]:
    from ..service import schema as wire

    n = config.memory_messages
    batches = [sample_messages(min(1_000, n - i), start=i // 4) for i in range(0, n, 1_000)]
    bodies = [_body(b) for b in batches]
    json_size = sum(len(m) for body in bodies for m in wire.decode_messages_body(body, max_messages=10_000))
    _print(f"\nStorage: {n:,} messages of {json_size / n:,.0f} bytes of JSON on average, appended in batches of 1,000")
    _print(f"{'store':<11} {'bytes/message':>14} {'JSON bytes':>11} {'ratio':>6}  measured as")
    rows: list[StorageRow] = []
    for target in targets:
        used, what = asyncio.run(_storage_of(target, bodies))
        row = StorageRow(target.name, used / n, json_size / n, what)
        rows.append(row)
        goal = (
            f"  (goal <= {GOAL_MEMORY}: {'met' if row.ratio <= GOAL_MEMORY else 'NOT met'})"
            if target.name == "memory"
            else ""
        )
        _print(
            f"{row.store:<11} {row.per_message:>14,.0f} {row.json_per_message:>11,.0f} {row.ratio:>6.2f}  {what}{goal}"
        )
    return rows


async def _storage_of(target: StoreTarget, bodies: list[bytes]) -> tuple[int, str]:
    from ..service import schema as wire
    from ..stores import open_store

    key = f"bench-storage-{uuid.uuid4().hex[:8]}"
    if target.name == "memory":
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            store = open_store("memory://")
            for body in bodies:  # what the service does per request: parse and check once, keep the bytes
                await store.append(key, wire.decode_messages_body(body, max_messages=10_000))
            gc.collect()
            used = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        del store
        return used, "Python heap held by the store (tracemalloc), the service's own bookkeeping included"
    store = open_store(target.url)
    try:
        await store.summaries()  # creates the schema, so it is not counted
        before = await _database_size(target, key)
        for body in bodies:
            await store.append(key, wire.decode_messages_body(body, max_messages=10_000))
        after = await _database_size(target, key)
    finally:
        await store.close()
    what = {
        "sqlite": "growth of the database file (WAL checkpointed)",
        "postgresql": "growth of the tables and indexes (pg_total_relation_size)",
        "redis": "MEMORY USAGE of the conversation's list",
    }[target.name]
    return after - before, what


async def _database_size(target: StoreTarget, key: str) -> int:
    if target.name == "sqlite":
        import sqlite3

        from ..stores.sqlite import path_from_url

        path = path_from_url(target.url)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages, size = (
                conn.execute("PRAGMA page_count").fetchone()[0],
                conn.execute("PRAGMA page_size").fetchone()[0],
            )
        return int(pages) * int(size)
    if target.name == "postgresql":
        import psycopg

        from ..stores._urls import split_url
        from ..stores.postgres import CHATLAB_PARAMETERS

        conninfo, ours = split_url(target.url, CHATLAB_PARAMETERS)
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            total = 0
            for table in ("chatlab_messages", "chatlab_conversations"):
                row = conn.execute(
                    "SELECT pg_total_relation_size(format('%%I.%%I', %s::text, %s::text)::regclass)",
                    (ours["schema"], table),
                ).fetchone()
                total += int(row[0]) if row is not None else 0
            return total
    import redis

    from ..stores._urls import split_url
    from ..stores.redis import CHATLAB_PARAMETERS

    client_url, ours = split_url(target.url, CHATLAB_PARAMETERS)
    client = redis.Redis.from_url(client_url, socket_timeout=5)
    try:
        return int(client.memory_usage(f"{ours['prefix']}messages:{key}", samples=0) or 0)
    finally:
        client.close()


def _versions() -> str:
    import fastapi
    import uvicorn

    http = "httptools" if _importable("httptools") else "h11"
    loop = "uvloop" if _importable("uvloop") else "asyncio"
    return (
        f"Python {platform.python_version()}, FastAPI {fastapi.__version__}, uvicorn {uvicorn.__version__} "
        f"({http}, {loop} loop), {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"
    )


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def run(config: BenchConfig) -> int:
    """Run every part of the benchmark and print it; 0 unless the benchmark itself broke."""
    gen = load_generator(config.load, config.connections)
    with tempfile.TemporaryDirectory(prefix="chatlab-bench-") as tmpdir, _targets(config, Path(tmpdir)) as targets:
        tmp = Path(tmpdir)
        mode = "quick" if config.quick else "full"
        _print(f"chatlab bench ({mode}): {_versions()}")
        _print(
            f"load generator: {gen.name}; {config.seconds:g} s per run, median of {config.repeats}; loopback; "
            "ratio = median of service/ceiling over runs made back to back"
        )
        _print(
            f"stores: {', '.join(t.name for t in targets)}"
            + ("" if config.postgres_url else " (PostgreSQL: give --postgres-url or CHATLAB_TEST_POSTGRES_URL)")
            + ("" if config.redis_url else " (Redis: give --redis-url or CHATLAB_TEST_REDIS_URL)")
        )
        _print_http_header(len(_read_response_size()), len(_body(sample_messages(APPEND_MESSAGES, start=1000))))
        http_rows = bench_http(config, targets, tmp, gen)
        turn_rows = bench_provider(config, targets)
        storage_rows = bench_storage(config, targets, tmp)
        bench_stall(config.quick)
        _print_goals(config, http_rows, turn_rows, storage_rows)
    gen.close()
    return 0


def _read_response_size() -> bytes:
    from ..service import schema as wire

    return b"[" + b",".join(wire.decode_messages_body(_body(sample_messages(READ_MESSAGES)), max_messages=100)) + b"]"


def _print_goals(
    config: BenchConfig, http_rows: list[HttpRow], turn_rows: list[TurnRow], storage_rows: list[StorageRow]
) -> None:
    _print("\nGoals (in-memory store):")
    for row in http_rows:
        if row.store == "memory":
            goal = GOAL_READ if row.op == "read" else GOAL_APPEND
            _print(
                f"  {row.op} >= {goal} of the ceiling: {row.ratio:.2f} ({'met' if row.ratio >= goal else 'NOT met'})"
            )
    turns = {(r.length, r.mode): r.ms for r in turn_rows if r.store == "memory"}
    lo, hi = min(config.lengths), max(config.lengths)
    if (lo, "incremental") in turns and (hi, "incremental") in turns:
        factor = turns[(hi, "incremental")] / turns[(lo, "incremental")]
        met = "met" if factor <= GOAL_TURN else "NOT met"
        _print(
            f"  provider turn at {hi:,} messages <= {GOAL_TURN}x the turn at {lo:,}: {factor:.2f}x ({met}; "
            f"full loads: {turns[(hi, 'full')] / turns[(lo, 'full')]:.1f}x)"
        )
    for storage in storage_rows:
        if storage.store == "memory":
            _print(
                f"  memory per message <= {GOAL_MEMORY}x its JSON: {storage.ratio:.2f}x "
                f"({'met' if storage.ratio <= GOAL_MEMORY else 'NOT met'})"
            )
    if config.quick:
        _print("(quick mode: short runs on a shared machine; figures are indicative, nothing fails on them)")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    overrides: dict[str, Any] = {}
    for name in ("seconds", "repeats", "connections", "turns", "memory_messages"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    if args.lengths:
        overrides["lengths"] = tuple(int(x) for x in args.lengths.split(","))
    if args.stores:
        known = ("memory", "sqlite", "postgresql", "redis")
        stores = tuple(s.strip() for s in args.stores.split(",") if s.strip())
        unknown = [s for s in stores if s not in known]
        if unknown:
            raise ValueError(f"unknown store(s) {', '.join(unknown)}: choose from {', '.join(known)}")
        overrides["stores"] = stores
    overrides["postgres_url"] = args.postgres_url or os.environ.get("CHATLAB_TEST_POSTGRES_URL") or None
    overrides["redis_url"] = args.redis_url or os.environ.get("CHATLAB_TEST_REDIS_URL") or None
    overrides["load"] = args.load
    return BenchConfig.quick_mode(**overrides) if args.quick else BenchConfig(**overrides)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short runs for CI (well under a minute)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per load run (default 5; quick 1)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="load runs per figure, median taken (default 3; quick 1)"
    )
    parser.add_argument(
        "--connections", type=int, default=None, help="keep-alive connections of the load generator (16)"
    )
    parser.add_argument("--lengths", default=None, help="history lengths of the provider turns (default 10,1000,10000)")
    parser.add_argument(
        "--turns",
        type=int,
        default=None,
        help="full-load turns measured per length, 4x as many incremental ones (default 20; quick 2)",
    )
    parser.add_argument("--memory-messages", type=int, default=None, help="messages stored for the storage figures")
    parser.add_argument(
        "--stores", default=None, help="comma list of memory,sqlite,postgresql,redis (default: all available)"
    )
    parser.add_argument("--postgres-url", default=None, help="PostgreSQL server (default CHATLAB_TEST_POSTGRES_URL)")
    parser.add_argument("--redis-url", default=None, help="Redis server (default CHATLAB_TEST_REDIS_URL)")
    parser.add_argument(
        "--load",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="load generator: wrk if installed (auto), or the built-in Python one",
    )
