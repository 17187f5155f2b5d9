"""``python -m chatlab bench``: how fast what users run is, against the limit of its server stack.

One run prints, for each store available (memory, SQLite, and PostgreSQL / Redis when their
URLs are given):

1. **HTTP** (:mod:`.http`): requests per second and p50/p99 latency of reading a 20-message
   conversation and of appending a 4-message batch with an ``Idempotency-Key``, the service
   started as ``chatlab serve`` starts it, against a bare Starlette app (the *ceiling*), which
   is itself measured against a raw ASGI app (the *limit*), all on the same server stack
   (:mod:`chatlab.serverstack`) in the same run. Ratios are medians of back-to-back pairs. For each
   database store, the store alone (:mod:`.database`: no HTTP, no service) in the same rounds: the
   bound the database sets on this machine.
2. **Provider** (:mod:`.turns`): the time and HTTP bytes of one agent turn at history lengths
   10, 1,000 and 10,000, the lengths measured in the same rounds.
3. **Storage** (:mod:`.storage`): bytes per message under the provider's traffic: the
   service process's RSS growth for the in-memory store (tracemalloc beside it), the
   database's growth for the others.
4. **Loop stall** (:mod:`.stall`): how long a ``GET /`` waits while the largest body is written.
5. **Goals** (:mod:`.report`): each with its figure and met / NOT met.

The rest: the arguments (:mod:`.config`), the messages (:mod:`.workload`), the servers
(:mod:`.servers`, :mod:`.ceiling`), the load generators (:mod:`.load`), the stores
(:mod:`.targets`). ``--quick`` is the CI mode: short runs, at least 3 pairs per ratio; it never
fails because a figure is slow (it prints them), only when the benchmark itself breaks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .config import BenchConfig, add_arguments, config_from_args
from .http import bench_http, read_answer
from .load import load_generator
from .report import goals, print_goals, print_http_header, print_setup
from .stall import bench_stall
from .storage import bench_storage
from .targets import store_targets
from .turns import bench_provider
from .workload import append_body, sample_messages, sample_turn

__all__ = ["BenchConfig", "add_arguments", "config_from_args", "run", "sample_messages", "sample_turn"]


def run(config: BenchConfig) -> int:
    """Run every part of the benchmark and print it; 0 unless the benchmark itself broke."""
    gen = load_generator(config.load, config.connections)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="chatlab-bench-") as tmpdir,
            store_targets(config, Path(tmpdir)) as targets,
        ):
            tmp = Path(tmpdir)
            print_setup(config, gen.name, [t.name for t in targets])
            http_rows = []
            for stack in config.stacks:
                print_http_header(stack, len(read_answer()), len(append_body()))
                http_rows += bench_http(config, stack, targets, tmp, gen)
            turn_rows = bench_provider(config, config.stacks[0], targets)
            storage_rows = bench_storage(config, config.stacks[0], targets)
            bench_stall(config.quick)  # the event loop's stall under the largest body (printed; no goal)
            measured = goals(config, http_rows, turn_rows, storage_rows)
            print_goals(config, measured)
    finally:
        gen.close()
    return 0
