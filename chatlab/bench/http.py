"""The HTTP figures: requests per second of a read and an append, against the ceiling and the limit.

For each server stack, three kinds of server run side by side: the **limit** (a raw ASGI app),
the **ceiling** (a bare Starlette app) and the **service** for each store, started as
``chatlab serve`` starts it. Every ratio is the median of back-to-back pairs of runs, made in
alternating order, so that a noisy moment of a shared machine hits both sides of a pair alike:
service / ceiling for each store, ceiling / limit for the framework. For each database store the
same rounds also run the store alone (:mod:`.database`: no HTTP, no service), next to the same
ceiling runs: the upper bound the database sets on this machine.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..serverstack import server_stack
from .config import BenchConfig
from .database import AloneRun, StoreAlone
from .load import LoadGenerator, LoadResult, median_run
from .servers import ServerProcess
from .targets import StoreTarget
from .workload import APPEND_KEYS, READ_MESSAGES, append_body, body, sample_messages

READ_PATH = "/chat-history/bench-read"
APPEND_PATH = "/chat-history/bench-append"
OPS = ("read", "append")


_NOT_RUN = LoadResult(float("nan"), float("nan"), float("nan"), 0, 0)


@dataclass
class HttpRow:
    """One server's figure for one operation, next to what it is measured against (``base``)."""

    stack: str
    store: str  # a store's name, or "ceiling" (measured against the limit)
    op: str
    server: LoadResult = field(default_factory=lambda: _NOT_RUN)
    base: LoadResult = field(default_factory=lambda: _NOT_RUN)
    #: server/base of each pair of runs made back to back
    pair_ratios: list[float] = field(default_factory=list)
    #: a database store's runs alone (no HTTP), each made next to a ``base`` run, and their ratios to it
    alone: list[AloneRun] = field(default_factory=list)
    alone_ratios: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.pair_ratios) if self.pair_ratios else float("nan")

    @property
    def alone_run(self) -> AloneRun | None:
        """The store-alone run of median rate (``None``: not measured)."""
        return sorted(self.alone, key=lambda r: r.rps)[len(self.alone) // 2] if self.alone else None

    @property
    def alone_ratio(self) -> float:
        return statistics.median(self.alone_ratios) if self.alone_ratios else float("nan")


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
    from .report import print_alone_bounds, print_http_row

    (tmp / "read.json").write_bytes(read_answer())
    (tmp / "append.json").write_bytes(append_body())
    loads = {"read": _Load(READ_PATH, None, 1), "append": _Load(APPEND_PATH, tmp / "append.json", APPEND_KEYS)}
    rows: list[HttpRow] = []
    with (
        ServerProcess("limit", stack, read_body=tmp / "read.json") as limit,
        ServerProcess("ceiling", stack, read_body=tmp / "read.json") as ceiling,
    ):
        for op in OPS:
            _warm_up(limit.url, loads[op])
            _warm_up(ceiling.url, loads[op])
            rows.append(_pairs(config, gen, HttpRow(stack, "ceiling", op), ceiling, limit, loads[op]))
            print_http_row(rows[-1])
        for target in targets:
            with ServerProcess("service", stack, store=target.url) as service, _alone(config, stack, target) as alone:
                _fill_read_conversation(service.url)
                for op in OPS:
                    _warm_up(service.url, loads[op])
                    if alone is not None:
                        alone.warm_up(op)
                    alone_run = functools.partial(alone.run, op) if alone is not None else None
                    rows.append(
                        _pairs(config, gen, HttpRow(stack, target.name, op), service, ceiling, loads[op], alone_run)
                    )
                    print_http_row(rows[-1])
    print_alone_bounds(rows, config.connections)
    return rows


def _alone(
    config: BenchConfig, stack: str, target: StoreTarget
) -> contextlib.AbstractContextManager[StoreAlone | None]:
    """The store alone, for a database store (the in-memory store has no database to bound it)."""
    if target.name == "memory":
        return contextlib.nullcontext()
    return StoreAlone(target, server_stack(stack).loop, config.connections)


def _pairs(
    config: BenchConfig,
    gen: LoadGenerator,
    row: HttpRow,
    server: ServerProcess,
    base: ServerProcess,
    load: _Load,
    alone: Callable[[float], AloneRun] | None = None,
) -> HttpRow:
    """``row`` filled with ``config.repeats`` rounds of back-to-back runs of ``server`` and ``base`` (and
    ``alone``), in alternating order with ``base`` in the middle, so each ratio is of runs side by side."""
    server_side: list[LoadResult] = []
    base_side: list[LoadResult] = []
    for repeat in range(config.repeats):
        order = ("alone", "base", "server") if repeat % 2 == 0 else ("server", "base", "alone")
        runs: dict[str, LoadResult] = {}
        for side in order:
            if side != "alone":
                url = (server if side == "server" else base).url
                runs[side] = gen.run(url, load.path, load.body, config.seconds, load.keys)
            elif alone is not None:
                row.alone.append(alone(config.seconds))
        server_side.append(runs["server"])
        base_side.append(runs["base"])
        b = runs["base"].rps
        row.pair_ratios.append(runs["server"].rps / b if b else float("nan"))
        if alone is not None:
            row.alone_ratios.append(row.alone[-1].rps / b if b else float("nan"))
    row.server, row.base = median_run(server_side), median_run(base_side)
    return row


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
