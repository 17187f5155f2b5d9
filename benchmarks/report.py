"""What the benchmark prints: the run's set-up, each table, and the goals, each with its figure and met / NOT met."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .config import PAGE, BenchConfig
from .http import SIDES, HttpRow
from .listing import KEYS, ListingRow
from .stall import StallRow
from .storage import StorageRow
from .turns import TurnRow
from .workload import APPEND_KEYS, APPEND_MESSAGES, READ_MESSAGES

GOAL_BASELINE = 2.0  # every store, read and append: chatlab against what a user would write instead
GOAL_CEILING = {"read": 0.7, "append": 0.5}  # the in-memory store against the bare Starlette app
GOAL_TURN = 1.2  # the provider's turn at the longest history against the turn at the shortest
GOAL_MEMORY = 2.0  # the service's RSS growth against the messages' JSON
GOAL_LISTING = 1.5  # every store: a page of summaries at the larger store against the page at the smaller
FULL_LISTING = BenchConfig().listing


@dataclass
class Goal:
    """One goal: what it asks, the figure measured, whether the figure meets it, and its passes' spread."""

    text: str
    figure: str
    met: bool
    #: for a ratio of passes, the lowest and highest pass
    spread: tuple[float, float] | None = None

    def line(self) -> str:
        spread = f" (passes {self.spread[0]:.2f}-{self.spread[1]:.2f})" if self.spread is not None else ""
        return f"  {self.text}: {self.figure}{spread} ({'met' if self.met else 'NOT met'})"


def say(*parts: object) -> None:
    print(*parts, flush=True)


def print_setup(config: BenchConfig, load_name: str, stores: Sequence[str]) -> None:
    import fastapi
    import starlette
    import uvicorn

    from chatlab.serverstack import server_stack

    mode = "quick" if config.quick else "full"
    say(
        f"chatlab benchmark ({mode}): Python {platform.python_version()}, FastAPI {fastapi.__version__}, "
        f"Starlette {starlette.__version__}, uvicorn {uvicorn.__version__} with {server_stack(config.stack)}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"
    )
    say(
        f"load generator: {load_name}; {config.seconds:g} s per run; ratio = median over {config.repeats} passes "
        "of the four servers run back to back (in alternating order); loopback"
    )
    say(
        f"stores: {', '.join(stores)}"
        + ("" if config.postgres_url else " (PostgreSQL: give --postgres-url or CHATLAB_TEST_POSTGRES_URL)")
        + ("" if config.redis_url else " (Redis: give --redis-url or CHATLAB_TEST_REDIS_URL)")
    )


def print_http_header(read_size: int, append_size: int) -> None:
    say(
        f"\nHTTP: read = GET of a {READ_MESSAGES}-message conversation ({read_size:,} bytes); append = POST of a "
        f"{APPEND_MESSAGES}-message batch ({append_size:,} bytes) with an Idempotency-Key, to {APPEND_KEYS} "
        "conversations in turn. service = `chatlab serve`; baseline = the obvious FastAPI app on the same store "
        "(benchmarks/baselines); ceiling = a bare Starlette app; floor = a bare FastAPI app made as the service's"
    )
    say(
        "x baseline, x ceiling: the service's requests a second over theirs, median of the passes; floor: the floor's "
        "over the ceiling's (the most a FastAPI service reaches here); CPU: the server process's CPU time per request "
        "(steadier than the rate on a busy machine; a database's own CPU not counted)"
    )
    say(
        f"{'store':<11} {'op':<7} {'service/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU µs':>7} | {'baseline/s':>10} "
        f"{'p50 ms':>7} {'CPU µs':>7} | {'ceiling/s':>9} | {'x baseline':>10} {'x ceiling':>9} {'floor':>6}"
    )


def print_http_row(row: HttpRow) -> None:
    s, b, c = row.median("service"), row.median("baseline"), row.median("ceiling")
    errors = sum(r.errors for side in row.runs.values() for r in side)
    note = f"  ({errors} non-2xx answers)" if errors else ""
    cpu_s, cpu_b = row.cpu_per_request("service") * 1e6, row.cpu_per_request("baseline") * 1e6
    say(
        f"{row.store:<11} {row.op:<7} {s.rps:>9,.0f} {s.p50_ms:>7.2f} {s.p99_ms:>7.2f} {cpu_s:>7,.0f} | "
        f"{b.rps:>10,.0f} {b.p50_ms:>7.2f} {cpu_b:>7,.0f} | {c.rps:>9,.0f} | {row.baseline_ratio:>10.2f} "
        f"{row.ceiling_ratio:>9.2f} {row.floor_ratio:>6.2f}{note}"
    )


def print_cpu_budget(rows: Sequence[HttpRow]) -> None:
    """Where each request's CPU goes, and how much of it the service's own work may take for the goals to be met."""
    say(
        "\nCPU per request (µs; each server process, median of the passes). own: the service's CPU beyond the FastAPI "
        f"floor's, its own work; room: the most its own work may take for the service to reach {GOAL_BASELINE}x the "
        "baseline's rate on a CPU-bound server (memory: then the ceiling goal's)"
    )
    say(f"{'store':<11} {'op':<7} " + " ".join(f"{side:>8}" for side in SIDES) + f" | {'own':>6} {'room':>11}")
    for row in rows:
        say(cpu_budget_line(row))


def cpu_budget_line(row: HttpRow) -> str:
    """One row of :func:`print_cpu_budget`."""
    cpu = {side: row.cpu_per_request(side) * 1e6 for side in SIDES}
    room = [cpu["baseline"] / GOAL_BASELINE - cpu["floor"]]
    if row.store == "memory":
        room.append(cpu["ceiling"] / GOAL_CEILING[row.op] - cpu["floor"])
    rooms = " / ".join(f"{r:,.0f}" for r in room)
    sides = " ".join(f"{cpu[side]:>8,.0f}" for side in SIDES)
    return f"{row.store:<11} {row.op:<7} {sides} | {cpu['service'] - cpu['floor']:>6,.0f} {rooms:>11}"


def print_turn_rows(rows: Sequence[TurnRow], *, first: bool) -> None:
    if first and rows:
        shortest = min(r.length for r in rows)
        say(f"{'store':<11} {'history':>8} {'mode':<12} {'ms/turn':>9} {'bytes/turn':>11} {f'vs {shortest:,}':>8}")
    for r in rows:
        say(f"{r.store:<11} {r.length:>8,} {r.mode:<12} {r.ms:>9.2f} {r.bytes:>11,} {r.vs_shortest:>7.2f}x")


def print_storage_row(row: StorageRow) -> None:
    say(
        f"\nMemory: {row.messages:,} messages sent as the provider sends them ({APPEND_MESSAGES} per append, each with "
        f"an Idempotency-Key) to `chatlab serve` on the in-memory store: RSS growth {row.per_message:,.0f} bytes per "
        f"message, {row.json_per_message:,.0f} bytes of JSON: {row.ratio:.2f}x"
    )


def print_stall_header(conversations: int) -> None:
    say(
        "\nStalls: GET / alone, then while a client repeats a large job (each on a service of its own): PUT of the "
        f"worst body the default limits allow; GET /chat-history of {conversations:,} conversations (in-memory)"
    )
    say(f"  {'GET / ...':<28}{'p50 ms':>8}{'p99 ms':>9}{'max ms':>9}{'requests':>10}")


def print_stall_rows(row: StallRow) -> None:
    say(row.alone.row(f"alone ({row.job})"))
    each = f"{statistics.median(row.took):.3f} s" if row.took else "n/a"
    say(row.loaded.row(f"during {row.job}", f"({len(row.took)} jobs of {each} each, {row.size:,} bytes)"))


def print_listing_header(config: BenchConfig) -> None:
    lo, hi = config.listing
    quick = f" (quick mode; the full run: {FULL_LISTING[0]:,} and {FULL_LISTING[1]:,})" if config.quick else ""
    say(
        f"\nListing: one page of {PAGE} summaries, after one of {KEYS} keys in the middle, from a store of {lo:,} "
        f"conversations and from one of {hi:,}{quick}. store = `store.summaries(after=KEY, limit={PAGE})`; "
        f"HTTP = `GET /chat-history?limit={PAGE}&after=KEY` to the service on that store"
    )
    say(
        f"ms: a page's time, median of the passes (each the median of its pages); ratio: the page at {hi:,} over "
        f"the page at {lo:,}, median over {config.repeats} passes"
    )
    at_lo, at_hi = f"ms at {lo:,}", f"ms at {hi:,}"
    say(f"{'store':<11} {at_lo:>14} {at_hi:>14} {'ratio':>7} | {'HTTP ' + at_lo:>14} {at_hi:>14} {'ratio':>7}")


def print_listing_row(row: ListingRow) -> None:
    lo, hi = row.direct.ms()
    line = f"{row.store:<11} {lo:>14.3f} {hi:>14.3f} {row.direct.ratio:>6.2f}x | "
    if row.http is None:
        line += row.note
    else:
        http_lo, http_hi = row.http.ms()
        line += f"{http_lo:>14.3f} {http_hi:>14.3f} {row.http.ratio:>6.2f}x"
    say(line)


def goals(
    config: BenchConfig,
    http_rows: Sequence[HttpRow],
    turn_rows: Sequence[TurnRow],
    storage: StorageRow | None,
    listing: Sequence[ListingRow] = (),
) -> list[Goal]:
    """Every goal the run has a figure for."""
    out: list[Goal] = []
    for row in http_rows:
        spread = (min(row.vs_baseline), max(row.vs_baseline))
        text = f"{row.store} {row.op} >= {GOAL_BASELINE} x the baseline"
        out.append(Goal(text, f"{row.baseline_ratio:.2f}", row.baseline_ratio >= GOAL_BASELINE, spread))
    for row in http_rows:
        if row.store == "memory":
            goal = GOAL_CEILING[row.op]
            spread = (min(row.vs_ceiling), max(row.vs_ceiling))
            text = f"memory {row.op} >= {goal} x the ceiling"
            out.append(Goal(text, f"{row.ceiling_ratio:.2f}", row.ceiling_ratio >= goal, spread))
    turns = {(r.length, r.mode): r for r in turn_rows if r.store == "memory"}
    lo, hi = min(config.lengths), max(config.lengths)
    if (hi, "incremental") in turns and lo != hi:
        factor = turns[(hi, "incremental")].vs_shortest
        full = turns[(hi, "full")].vs_shortest
        text = f"provider turn at {hi:,} messages <= {GOAL_TURN}x the turn at {lo:,}"
        out.append(Goal(text, f"{factor:.2f}x (full loads: {full:.1f}x)", factor <= GOAL_TURN))
    if storage is not None:
        text = f"memory (service RSS) <= {GOAL_MEMORY}x the JSON under the provider's traffic"
        out.append(Goal(text, f"{storage.ratio:.2f}x", storage.ratio <= GOAL_MEMORY))
    for listed in listing:
        lo, hi = listed.sizes
        ratios = listed.direct.ratios
        text = f"{listed.store} page of {PAGE} at {hi:,} conversations <= {GOAL_LISTING}x the page at {lo:,}"
        ratio = listed.direct.ratio
        out.append(Goal(text, f"{ratio:.2f}x", ratio <= GOAL_LISTING, (min(ratios), max(ratios))))
    return out


def print_goals(config: BenchConfig, measured: Sequence[Goal], http_rows: Sequence[HttpRow]) -> None:
    say("\nGoals (from this run):")
    for goal in measured:
        say(goal.line())
    floors = [f"{r.op} {r.floor_ratio:.2f}" for r in http_rows if r.store == "memory"]
    if floors:
        say(f"FastAPI floor against the ceiling (the most any FastAPI service reaches here): {', '.join(floors)}")
    database = [r for r in http_rows if r.store != "memory"]
    if database:
        say("Database stores against the ceiling (printed, not goals):")
        for row in database:
            say(f"  {row.store} {row.op}: {row.ceiling_ratio:.2f}")
    if config.quick:
        say("(quick mode: short runs on a shared machine; figures are indicative, nothing fails on them)")
