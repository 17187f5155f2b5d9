"""What the benchmark prints: the run's set-up, each table, and the goals, each with its figure and met / NOT met."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass

from .config import BenchConfig
from .http import HttpRow
from .storage import StorageRow
from .turns import TurnRow
from .workload import APPEND_KEYS, APPEND_MESSAGES, READ_MESSAGES

GOAL_READ = 0.7  # memory store: read and append against the bare Starlette ceiling
GOAL_APPEND = 0.5
GOAL_DB_READ = 0.5  # database stores
GOAL_DB_APPEND = 0.3
GOAL_TURN = 1.2  # the turn at the longest history against the turn at the shortest
GOAL_MEMORY = 2.0  # the service's RSS growth against the messages' JSON


@dataclass
class Goal:
    """One goal of the benchmark: what it asks, the figure measured, and whether the figure meets it."""

    text: str
    figure: str
    met: bool
    #: for a ratio of pairs of runs, the lowest and highest pair: how far one moment of a shared machine moves it (a
    #: goal inside that range is at the edge on this machine, whichever side the median fell)
    pairs: tuple[float, float] | None = None
    #: for a database store, the store alone's ratio: the bound of any service on it
    alone: float | None = None

    def line(self) -> str:
        spread = f" (pairs {self.pairs[0]:.2f}-{self.pairs[1]:.2f})" if self.pairs is not None else ""
        alone = f" (the store alone: {self.alone:.2f})" if self.alone is not None else ""
        return f"  {self.text}: {self.figure}{spread}{alone} ({'met' if self.met else 'NOT met'})"


def say(*parts: object) -> None:
    print(*parts, flush=True)


def print_setup(config: BenchConfig, load_name: str, stores: Sequence[str]) -> None:
    import fastapi
    import starlette
    import uvicorn

    mode = "quick" if config.quick else "full"
    say(
        f"chatlab bench ({mode}): Python {platform.python_version()}, FastAPI {fastapi.__version__}, "
        f"Starlette {starlette.__version__}, uvicorn {uvicorn.__version__}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}"
    )
    say(
        f"load generator: {load_name}; {config.seconds:g} s per run; ratio = median of {config.repeats} pairs of "
        "runs made back to back (in alternating order); loopback"
    )
    say(
        f"stores: {', '.join(stores)}"
        + ("" if config.postgres_url else " (PostgreSQL: give --postgres-url or CHATLAB_TEST_POSTGRES_URL)")
        + ("" if config.redis_url else " (Redis: give --redis-url or CHATLAB_TEST_REDIS_URL)")
    )


def print_http_header(stack: str, read_size: int, append_size: int) -> None:
    from ..serverstack import server_stack

    say(
        f"\nHTTP on the {stack} stack (uvicorn with {server_stack(stack)}): read = GET of a {READ_MESSAGES}-message "
        f"conversation ({read_size:,} bytes); append = POST of a {APPEND_MESSAGES}-message batch ({append_size:,} "
        f"bytes) with an Idempotency-Key, to {APPEND_KEYS} conversations in turn. The service runs as "
        "`chatlab serve`; ceiling = a bare Starlette app, limit = a raw ASGI app, on the same stack"
    )
    say(
        f"{'store':<11} {'op':<7} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} | {'against':<8} {'req/s':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} | {'ratio':>5} | {'store alone req/s':>17} {'ratio':>5} | goal"
    )


def http_goal(row: HttpRow) -> float | None:
    if row.store == "ceiling":
        return None
    if row.store == "memory":
        return GOAL_READ if row.op == "read" else GOAL_APPEND
    return GOAL_DB_READ if row.op == "read" else GOAL_DB_APPEND


def print_http_row(row: HttpRow) -> None:
    s, b = row.server, row.base
    goal = http_goal(row)
    verdict = "" if goal is None else f">= {goal} {'met' if row.ratio >= goal else 'NOT met'}"
    errors = f"  ({s.errors} errors)" if s.errors else ""
    against = "limit" if row.store == "ceiling" else "ceiling"
    alone = row.alone_run
    alone_text = f"{alone.rps:>17,.0f} {row.alone_ratio:>5.2f}" if alone is not None else " " * 23
    say(
        f"{row.store:<11} {row.op:<7} {s.rps:>8,.0f} {s.p50_ms:>7.2f} {s.p99_ms:>7.2f} | {against:<8} {b.rps:>8,.0f} "
        f"{b.p50_ms:>7.2f} {b.p99_ms:>7.2f} | {row.ratio:>5.2f} | {alone_text} | {verdict}{errors}"
    )


def print_alone_bounds(rows: Sequence[HttpRow], tasks: int) -> None:
    """What each database goal is measured against: the store alone's rate, as a share of the ceiling."""
    bounded = [r for r in rows if r.alone_run is not None]
    if not bounded:
        return
    say(
        f"store alone = no HTTP, no service: chatlab's store object (its code and driver) called from {tasks} asyncio "
        "tasks in the bench process on the stack's loop, each run beside a pair's ceiling run (ratio: the median "
        "against them): the most the service's operation gets through chatlab's store code and Python driver on this "
        "machine, so the bound of any chatlab service on this store; the database itself may serve more (pgbench, "
        "redis-benchmark). Beside it the bench process's CPU per operation (SQLite's included): one core at that "
        "cost serves at most the client limit"
    )
    for r in bounded:
        alone, goal = r.alone_run, http_goal(r)
        assert alone is not None and goal is not None
        reach = "within reach" if r.alone_ratio >= goal else "out of reach of the store alone"
        needs = goal * alone.rps / r.alone_ratio  # the ceiling as its paired runs measured it, so both agree
        say(
            f"  {r.store} {r.op} alone {alone.rps:,.0f}/s = {r.alone_ratio:.2f} of the ceiling: the goal {goal} needs "
            f"{needs:,.0f}/s ({reach}); the service reaches {r.ratio:.2f} of the ceiling, "
            f"{r.ratio / r.alone_ratio:.2f} of the store alone; store code CPU {alone.cpu_ms:.2f} ms/op in the bench "
            f"process (client limit {1000 / alone.cpu_ms:,.0f}/s per core)"
        )


def print_turn_rows(rows: Sequence[TurnRow], *, first: bool) -> None:
    if first and rows:
        shortest = min(r.length for r in rows)
        say(f"{'store':<11} {'history':>8} {'mode':<12} {'ms/turn':>9} {'bytes/turn':>11} {f'vs {shortest:,}':>8}")
    for r in rows:
        say(f"{r.store:<11} {r.length:>8,} {r.mode:<12} {r.ms:>9.2f} {r.bytes:>11,} {r.vs_shortest:>7.2f}x")


def print_storage_header(messages: int, json_per_message: float, appends: int) -> None:
    say(
        f"\nStorage: {messages:,} messages of {json_per_message:,.0f} bytes of JSON on average, as the provider sends "
        f"them: {appends:,} appends of {APPEND_MESSAGES} messages, each with an Idempotency-Key"
    )
    say(f"{'store':<11} {'bytes/message':>14} {'JSON bytes':>11} {'ratio':>6}  measured as")


def print_storage_row(row: StorageRow) -> None:
    heap = (
        f"; Python heap held by the store (tracemalloc): {row.heap_per_message:,.0f} bytes, {row.heap_ratio:.2f}x"
        if row.heap_per_message is not None and row.heap_ratio is not None
        else ""
    )
    say(f"{row.store:<11} {row.per_message:>14,.0f} {row.json_per_message:>11,.0f} {row.ratio:>6.2f}  {row.what}{heap}")


def goals(
    config: BenchConfig, http_rows: list[HttpRow], turn_rows: list[TurnRow], storage_rows: list[StorageRow]
) -> list[Goal]:
    """Every goal the run has a figure for, read on the first stack of the run."""
    out: list[Goal] = []
    stack = config.stacks[0]
    for row in http_rows:
        goal = http_goal(row)
        if row.stack == stack and goal is not None:
            text = f"{row.store} {row.op} >= {goal} of the ceiling ({stack} stack)"
            pairs = (min(row.pair_ratios), max(row.pair_ratios))
            alone = row.alone_ratio if row.alone_run is not None else None
            out.append(Goal(text, f"{row.ratio:.2f}", row.ratio >= goal, pairs, alone))
    turns = {(r.length, r.mode): r for r in turn_rows if r.store == "memory"}
    lo, hi = min(config.lengths), max(config.lengths)
    if (hi, "incremental") in turns and lo != hi:
        factor = turns[(hi, "incremental")].vs_shortest
        full = turns[(hi, "full")].vs_shortest
        text = f"provider turn at {hi:,} messages <= {GOAL_TURN}x the turn at {lo:,}"
        out.append(Goal(text, f"{factor:.2f}x (full loads: {full:.1f}x)", factor <= GOAL_TURN))
    for s in storage_rows:
        if s.store == "memory":
            text = f"memory (service RSS) <= {GOAL_MEMORY}x the JSON under the provider's traffic"
            heap = f"; tracemalloc {s.heap_ratio:.2f}x" if s.heap_ratio is not None else ""
            out.append(Goal(text, f"{s.ratio:.2f}x{heap}", s.ratio <= GOAL_MEMORY))
    return out


def print_goals(config: BenchConfig, measured: Sequence[Goal]) -> None:
    say("\nGoals (from this run):")
    for goal in measured:
        say(goal.line())
    if any(goal.pairs is not None for goal in measured):
        say("(pairs lo-hi: the lowest and highest of the back-to-back pairs whose median is the figure)")
    if config.quick:
        say("(quick mode: short runs on a shared machine; figures are indicative, nothing fails on them)")
