"""The HTTP figures: requests per second of a read and an append, against the ceiling and the limit.

For each server stack, three kinds of server run side by side: the **limit** (a raw ASGI app),
the **ceiling** (a bare Starlette app) and the **service** for each store, started as
``chatlab serve`` starts it. Every ratio is the median of back-to-back pairs of runs, made in
alternating order, so that a noisy moment of a shared machine hits both sides of a pair alike:
service / ceiling for each store, ceiling / limit for the framework.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .config import BenchConfig
from .load import LoadGenerator, LoadResult, median_run
from .servers import ServerProcess
from .targets import StoreTarget
from .workload import APPEND_KEYS, READ_MESSAGES, append_body, body, sample_messages

READ_PATH = "/chat-history/bench-read"
APPEND_PATH = "/chat-history/bench-append"
OPS = ("read", "append")


@dataclass
class HttpRow:
    """One server's figure for one operation, next to what it is measured against (``base``)."""

    stack: str
    store: str  # a store's name, or "ceiling" (measured against the limit)
    op: str
    server: LoadResult
    base: LoadResult
    #: server/base of each pair of runs made back to back
    pair_ratios: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.pair_ratios) if self.pair_ratios else float("nan")


@dataclass
class _Load:
    """What one operation's load sends."""

    path: str
    body: Path | None
    keys: int

    def raw(self) -> bytes | None:
        return self.body.read_bytes() if self.body else None


def read_answer() -> bytes:
    """The service's answer to the read load: its 20 messages as the JSON array it stores them in."""
    from ..service import schema

    messages = schema.decode_messages_body(body(sample_messages(READ_MESSAGES)), max_messages=100)
    return b"[" + b",".join(messages) + b"]"


def bench_http(
    config: BenchConfig, stack: str, targets: list[StoreTarget], tmp: Path, gen: LoadGenerator
) -> list[HttpRow]:
    """The limit, the ceiling and each store's service on ``stack``; prints each row as it is measured."""
    from .report import print_http_row

    (tmp / "read.json").write_bytes(read_answer())
    (tmp / "append.json").write_bytes(append_body())
    loads = {"read": _Load(READ_PATH, None, 1), "append": _Load(APPEND_PATH, tmp / "append.json", APPEND_KEYS)}
    rows: list[HttpRow] = []
    ceiling_runs: dict[str, list[LoadResult]] = {}
    with (
        ServerProcess("limit", stack, read_body=tmp / "read.json") as limit,
        ServerProcess("ceiling", stack, read_body=tmp / "read.json") as ceiling,
    ):
        for op in OPS:
            _warm_up(limit.url, loads[op])
            _warm_up(ceiling.url, loads[op])
            ceiling_side, limit_side, pairs = _pairs(config, gen, ceiling, limit, loads[op])
            ceiling_runs[op] = ceiling_side
            rows.append(HttpRow(stack, "ceiling", op, median_run(ceiling_side), median_run(limit_side), pairs))
            print_http_row(rows[-1])
        for target in targets:
            with ServerProcess("service", stack, store=target.url) as service:
                _fill_read_conversation(service.url)
                for op in OPS:
                    _warm_up(service.url, loads[op])
                    service_side, ceiling_side, pairs = _pairs(config, gen, service, ceiling, loads[op])
                    ceiling_runs[op] += ceiling_side
                    row = HttpRow(stack, target.name, op, median_run(service_side), median_run(ceiling_side), pairs)
                    rows.append(row)
                    print_http_row(row)
    return rows


def _pairs(
    config: BenchConfig, gen: LoadGenerator, server: ServerProcess, base: ServerProcess, load: _Load
) -> tuple[list[LoadResult], list[LoadResult], list[float]]:
    """``config.repeats`` back-to-back runs of ``server`` and ``base``, in alternating order, and their ratios."""
    server_side: list[LoadResult] = []
    base_side: list[LoadResult] = []
    ratios: list[float] = []
    for repeat in range(config.repeats):
        order = (base, server) if repeat % 2 == 0 else (server, base)
        runs = {s.target: gen.run(s.url, load.path, load.body, config.seconds, load.keys) for s in order}
        server_side.append(runs[server.target])
        base_side.append(runs[base.target])
        b = runs[base.target].rps
        ratios.append(runs[server.target].rps / b if b else float("nan"))
    return server_side, base_side, ratios


def _fill_read_conversation(url: str) -> None:
    """Store the read load's conversation, and check the service answers what the ceiling answers."""
    with httpx.Client(base_url=url, timeout=30) as client:
        # a PUT: the conversation holds exactly these messages, also in a store an earlier stack filled
        client.put(READ_PATH, content=body(sample_messages(READ_MESSAGES)), headers=_JSON).raise_for_status()
        got = client.get(READ_PATH)
        got.raise_for_status()
        if got.content != read_answer():
            raise RuntimeError("the service's read answer differs from the ceiling's: the comparison would be unfair")


_JSON = {"content-type": "application/json"}


def _warm_up(url: str, load: _Load) -> None:
    raw = load.raw()
    with httpx.Client(base_url=url, timeout=10) as client:
        for i in range(30):
            if raw is None:
                client.get(load.path).raise_for_status()
            else:
                client.post(f"{load.path}-{i % load.keys}", content=raw, headers=_JSON).raise_for_status()
