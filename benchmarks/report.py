"""The run's set-up line, the CPU table, and the goals: each with its figure and met / NOT met.

The measurements (:mod:`.http`, :mod:`.turns`, :mod:`.storage`, :mod:`.stall`, :mod:`.listing`) print their own
tables as they go; this module only reads their rows, so none of them imports it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass

from .config import PAGE, BenchConfig
from .http import SIDES, HttpRow
from .listing import ListingRow
from .stall import StallRow
from .storage import StorageRow
from .turns import TurnRow

#: the service's rate over the baseline's, on every store and operation ...
GOAL_BASELINE = 1.3
#: ... and more where the service's design (group commit, batching, the client cache's reads) should show
GOAL_BASELINE_BY_CASE = {
    ("memory", "read"): 1.5,
    ("sqlite", "read"): 2.0,
    ("sqlite", "append"): 2.0,
    ("postgresql", "read"): 2.0,
    ("postgresql", "append"): 2.0,
    ("redis", "read"): 2.0,
}
GOAL_STALL_MS = 100.0  # the longest a GET / may wait while another client's largest job runs
GOAL_TURN = 1.2  # the provider's turn at the longest history against the turn at the shortest
GOAL_MEMORY = 2.0  # the service's RSS growth against the messages' JSON
GOAL_LISTING = 1.5  # every store: a page at the larger (or crowded) store against the page at the smaller


def baseline_goal(store: str, op: str) -> float:
    """How many times the baseline's rate the service must reach on ``store`` for ``op``."""
    return GOAL_BASELINE_BY_CASE.get((store, op), GOAL_BASELINE)


@dataclass
class Goal:
    """One goal: what it asks, the figure measured, whether the figure meets it, and its passes' spread."""

    text: str
    figure: str
    met: bool
    #: for a ratio of passes, the lowest and highest pass
    spread: tuple[float, float] | None = None

    def line(self) -> str:
        """The goal as the run prints it."""
        spread = f" (passes {self.spread[0]:.2f}-{self.spread[1]:.2f})" if self.spread is not None else ""
        verdict = "met" if self.met else "NOT met"
        return f"  {self.text}: {self.figure}{spread} ({verdict})"


def print_setup(config: BenchConfig, load_name: str, stores: Sequence[str]) -> None:
    """The run's mode, versions, machine, load generator and stores."""
    import fastapi
    import starlette
    import uvicorn

    from chatlab.serverstack import server_stack

    mode = "quick" if config.quick else "full"
    print(
        f"chatlab benchmark ({mode}): Python {platform.python_version()}, FastAPI {fastapi.__version__}, "
        f"Starlette {starlette.__version__}, uvicorn {uvicorn.__version__} with {server_stack(config.stack)}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"
    )
    print(
        f"load generator: {load_name}; {config.seconds:g} s per run; ratio = median over {config.repeats} passes "
        "of the four servers run back to back (in alternating order); loopback"
    )
    print(
        f"stores: {', '.join(stores)}"
        + ("" if config.postgres_url else " (PostgreSQL: give --postgres-url or CHATLAB_TEST_POSTGRES_URL)")
        + ("" if config.redis_url else " (Redis: give --redis-url or CHATLAB_TEST_REDIS_URL)"),
        flush=True,
    )


def print_cpu_budget(rows: Sequence[HttpRow]) -> None:
    """Where each request's CPU goes, and how much of it the service's own work may take for the goals to be met."""
    print(
        "\nCPU per request (µs; each server process, median of the passes). own: the service's CPU beyond the FastAPI "
        "floor's, its own work; room: the most its own work may take for the service to reach its goal against the "
        "baseline's rate on a CPU-bound server"
    )
    heads = f"{'store':<11} {'op':<7} " + " ".join(f"{side:>8}" for side in SIDES) + f" | {'own':>6} {'room':>6}"
    print("\n".join([heads, *(cpu_budget_line(row) for row in rows)]), flush=True)


def cpu_budget_line(row: HttpRow) -> str:
    """One row of :func:`print_cpu_budget`."""
    cpu = {side: row.cpu_per_request(side) * 1e6 for side in SIDES}
    own = cpu["service"] - cpu["floor"]
    room = cpu["baseline"] / baseline_goal(row.store, row.op) - cpu["floor"]
    sides = " ".join(f"{cpu[side]:>8,.0f}" for side in SIDES)
    return f"{row.store:<11} {row.op:<7} {sides} | {own:>6,.0f} {room:>6,.0f}"


def goals(
    config: BenchConfig,
    http_rows: Sequence[HttpRow],
    turn_rows: Sequence[TurnRow],
    storage: StorageRow | None,
    listing: Sequence[ListingRow] = (),
    stalls: Sequence[StallRow] = (),
) -> list[Goal]:
    """Every goal the run has a figure for."""
    out: list[Goal] = []
    for row in http_rows:
        out.append(rate_goal(row))
    for row in http_rows:
        out.append(tail_goal(row))
    for stall in stalls:
        text = f"GET / during {stall.job} waits <= {GOAL_STALL_MS:g} ms"
        longest = stall.longest_wait_ms
        out.append(Goal(text, f"longest {longest:.1f} ms", longest <= GOAL_STALL_MS))
    turns = {(r.length, r.mode): r for r in turn_rows if r.store == "memory"}
    lo = min(config.lengths)
    hi = max(config.lengths)
    if (hi, "incremental") in turns and lo != hi:
        factor = turns[(hi, "incremental")].vs_shortest
        full = turns[(hi, "full")].vs_shortest
        text = f"provider turn at {hi:,} messages <= {GOAL_TURN}x the turn at {lo:,}"
        out.append(Goal(text, f"{factor:.2f}x (full loads: {full:.1f}x)", factor <= GOAL_TURN))
    if storage is not None:
        text = f"memory (service RSS) <= {GOAL_MEMORY}x the JSON under the provider's traffic"
        out.append(Goal(text, f"{storage.ratio:.2f}x", storage.ratio <= GOAL_MEMORY))
    for listed in listing:
        out += listing_goals(listed)
    return out


def rate_goal(row: HttpRow) -> Goal:
    """The service's rate against the baseline's on one store and operation."""
    goal = baseline_goal(row.store, row.op)
    spread = (min(row.vs_baseline), max(row.vs_baseline))
    text = f"{row.store} {row.op} >= {goal} x the baseline"
    return Goal(text, f"{row.baseline_ratio:.2f}", row.baseline_ratio >= goal, spread)


def tail_goal(row: HttpRow) -> Goal:
    """The service's p99 against the baseline's, from the same passes."""
    service = row.p99_ms("service")
    baseline = row.p99_ms("baseline")
    text = f"{row.store} {row.op} p99 <= the baseline's p99"
    return Goal(text, f"{service:.1f} ms against {baseline:.1f} ms", service <= baseline)


def listing_goals(row: ListingRow) -> list[Goal]:
    """A page at the larger store, and beside the namespaced conversations, against the page at the smaller."""
    lo, hi = row.sizes
    out: list[Goal] = []
    ratios = row.direct.ratios
    text = f"{row.store} page of {PAGE} at {hi:,} conversations <= {GOAL_LISTING}x the page at {lo:,}"
    ratio = row.direct.ratio
    out.append(Goal(text, f"{ratio:.2f}x", ratio <= GOAL_LISTING, (min(ratios), max(ratios))))
    text = f"{row.store} page of {PAGE} beside {hi:,} namespaced conversations <= {GOAL_LISTING}x the page at {lo:,}"
    if row.beside is None:
        out.append(Goal(text, row.note or "not measured", False))
    else:
        ratios = row.beside.ratios
        ratio = row.beside.ratio
        out.append(Goal(text, f"{ratio:.2f}x", ratio <= GOAL_LISTING, (min(ratios), max(ratios))))
    return out


def print_goals(config: BenchConfig, measured: Sequence[Goal], http_rows: Sequence[HttpRow]) -> None:
    """The goals, then the ceiling's figures, which are printed but are not goals."""
    lines = ["\nGoals (from this run):", *(goal.line() for goal in measured)]
    floors = [f"{r.op} {r.floor_ratio:.2f}" for r in http_rows if r.store == "memory"]
    if floors:
        lines.append(
            f"FastAPI floor against the ceiling (the most any FastAPI service reaches here): {', '.join(floors)}"
        )
    if http_rows:
        lines.append("The service against the ceiling, a bare Starlette app (printed, not goals):")
        lines += [f"  {row.store} {row.op}: {row.ceiling_ratio:.2f}" for row in http_rows]
    if config.quick:
        lines.append("(quick mode: short runs on a shared machine; figures are indicative, nothing fails on them)")
    print("\n".join(lines), flush=True)
