"""``python -m benchmarks``: how fast chatlab is against what a user would write instead.

Run from a clone's root. One run prints, for each store available (memory, SQLite, and
PostgreSQL / Redis when their URLs are given):

1. **HTTP** (:mod:`.http`): requests per second of reading a 20-message conversation and of
   appending a 4-message batch with an ``Idempotency-Key``: the service started as ``chatlab
   serve`` starts it, the obvious FastAPI app on the same store (:mod:`.baselines`), a bare
   Starlette app and a bare FastAPI app (:mod:`.ceiling`), on the same server stack, in passes
   run back to back, with each side's p50 and p99 latency; then each side's CPU per request, and the
   room the goals leave the service's own work beyond the FastAPI floor.
2. **Provider** (:mod:`.turns`): the time and HTTP bytes of one agent turn at history lengths
   10, 1,000 and 10,000.
3. **Memory** (:mod:`.storage`): the service's RSS per message under the provider's traffic.
4. **Stalls** (:mod:`.stall`): how long a ``GET /`` waits while the worst body is written and
   while ``GET /chat-history`` lists 100,000 conversations.
5. **Listing** (:mod:`.listing`): one page of 100 summaries from a store of 1,000 conversations
   and from one of 100,000, through the store's interface and over HTTP; and over HTTP beside
   100,000 conversations of other namespaces.
6. **Goals** (:mod:`.report`): each with its figure and met / NOT met.

The benchmark uses chatlab's public API only (the CLI, ``open_store``, the store interface,
``create_app``, the provider). ``--quick`` is the CI mode: short runs, at least 3 passes per ratio;
it never fails because a figure is slow (it prints them), only when the benchmark itself breaks.
``--parts`` runs some of the parts only (``http``, ``provider``, ``memory``, ``stalls``, ``listing``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .config import BenchConfig, add_arguments, config_from_args
from .http import bench_http
from .listing import bench_listing
from .load import load_generator
from .report import goals, print_cpu_budget, print_goals, print_setup
from .stall import bench_stall
from .storage import bench_storage
from .targets import store_targets
from .turns import bench_provider

__all__ = ["BenchConfig", "add_arguments", "config_from_args", "run"]


def run(config: BenchConfig) -> int:
    """Run every part of the benchmark and print it; 0 unless the benchmark itself broke."""
    gen = load_generator(config.load, config.connections)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="chatlab-bench-") as tmpdir,
            store_targets(config, Path(tmpdir)) as targets,
        ):
            print_setup(config, gen.name, [t.name for t in targets])
            http_rows = []
            if "http" in config.parts:
                http_rows = bench_http(config, targets, Path(tmpdir), gen)
                print_cpu_budget(http_rows)
            turn_rows = bench_provider(config, targets) if "provider" in config.parts else []
            storage = None
            if "memory" in config.parts and "memory" in config.stores:
                storage = bench_storage(config)
            stalls = bench_stall(config) if "stalls" in config.parts else []
            listing = []
            if "listing" in config.parts:
                listing = bench_listing(config, [t.name for t in targets], Path(tmpdir))
            measured = goals(config, http_rows, turn_rows, storage, listing, stalls)
            print_goals(config, measured, http_rows)
    finally:
        gen.close()
    return 0
