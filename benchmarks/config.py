"""The benchmark's arguments: what ``python -m benchmarks`` takes, and the run they describe."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from chatlab.serverstack import STACKS, server_stack

STORES = ("memory", "sqlite", "postgresql", "redis")
PARTS = ("http", "provider", "memory", "stalls", "listing")  # the benchmark's parts, in the order they run
PAGE = 100  # summaries per page of the listing's figure


@dataclass
class BenchConfig:
    """One run's settings (``--quick``: short runs, still at least 3 pairs per ratio)."""

    quick: bool = False
    seconds: float = 3.0
    repeats: int = 5
    connections: int = 16
    lengths: tuple[int, ...] = (10, 1_000, 10_000)
    turns: int = 20
    memory_messages: int = 20_000
    #: conversations stored for the ``GET /chat-history`` figure
    conversations: int = 100_000
    #: conversations held by the listing's two stores: a page at the larger against a page at the smaller
    listing: tuple[int, int] = (1_000, 100_000)
    stores: tuple[str, ...] = STORES
    #: the parts measured (``--parts``): a goal whose part is left out is not printed
    parts: tuple[str, ...] = PARTS
    #: the server stack every server of the run is on; by default the one ``serve`` runs on
    stack: str = field(default_factory=lambda: server_stack().name)
    postgres_url: str | None = None
    redis_url: str | None = None
    load: str = "auto"

    @classmethod
    def quick_mode(cls, **overrides: Any) -> BenchConfig:
        """The ``--quick`` run: short runs and small sizes, at least 3 passes per ratio; ``overrides`` win."""
        values: dict[str, Any] = {"quick": True, "seconds": 1.0, "repeats": 3, "turns": 3, "memory_messages": 4_000}
        values["listing"] = (1_000, 20_000)
        values.update(overrides)
        return cls(**values)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """The run the command line asks for; ``ValueError`` says what is wrong with it."""
    overrides: dict[str, Any] = {}
    for name in ("seconds", "repeats", "connections", "turns", "memory_messages", "conversations"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    if overrides.get("repeats", 3) < 1:
        raise ValueError("--repeats must be at least 1")
    if overrides.get("conversations", 1) < 1:
        raise ValueError("--conversations must be at least 1")
    if args.lengths:
        try:
            overrides["lengths"] = tuple(sorted(int(x) for x in args.lengths.split(",")))
        except ValueError:
            raise ValueError(f"--lengths takes whole numbers separated by commas, not {args.lengths!r}") from None
    if args.listing:
        overrides["listing"] = listing_sizes(args.listing)
    if args.stores:
        overrides["stores"] = choices("store", args.stores, STORES)
    if args.parts:
        overrides["parts"] = choices("part", args.parts, PARTS)
    if args.stack:
        overrides["stack"] = server_stack(args.stack).name
    overrides["postgres_url"] = args.postgres_url or os.environ.get("CHATLAB_TEST_POSTGRES_URL") or None
    overrides["redis_url"] = args.redis_url or os.environ.get("CHATLAB_TEST_REDIS_URL") or None
    overrides["load"] = args.load
    return BenchConfig.quick_mode(**overrides) if args.quick else BenchConfig(**overrides)


def listing_sizes(text: str) -> tuple[int, int]:
    """``--listing``'s two store sizes, smaller first (``ValueError`` unless two whole numbers of at least 200)."""
    try:
        sizes = sorted(int(x) for x in text.split(","))
    except ValueError:
        sizes = []
    if len(sizes) != 2 or sizes[0] < 2 * PAGE:
        raise ValueError(f"--listing takes two numbers of conversations, each at least {2 * PAGE}, not {text!r}")
    return sizes[0], sizes[1]


def choices(what: str, text: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """The comma list ``text``, each item one of ``known`` (else ``ValueError``)."""
    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in chosen if s not in known]
    if unknown or not chosen:
        raise ValueError(f"unknown {what}(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(known)}")
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    parser.add_argument("--quick", action="store_true", help="short runs for CI (a few minutes)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per load run (default 3; quick 1)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="back-to-back passes per ratio, median taken (default 5; quick 3)"
    )
    parser.add_argument("--connections", type=int, default=None, help="keep-alive connections of the load (16)")
    parser.add_argument("--lengths", default=None, help="history lengths of the provider turns (default 10,1000,10000)")
    parser.add_argument(
        "--turns", type=int, default=None, help="full-load turns per length, 4x as many incremental (20; quick 3)"
    )
    parser.add_argument(
        "--memory-messages", type=int, default=None, help="messages sent for the memory figure (20000; quick 4000)"
    )
    parser.add_argument(
        "--conversations", type=int, default=None, help="conversations listed by GET /chat-history (100000)"
    )
    parser.add_argument(
        "--listing",
        default=None,
        help="conversations of the two stores a page of summaries is read from (1000,100000; quick 1000,20000)",
    )
    parser.add_argument("--stores", default=None, help="comma list of memory,sqlite,postgresql,redis (default: all)")
    parser.add_argument(
        "--parts", default=None, help="comma list of http,provider,memory,stalls,listing to measure (default: all)"
    )
    parser.add_argument(
        "--stack", default=None, choices=STACKS, help="server stack of every server (default: the one `serve` uses)"
    )
    parser.add_argument("--postgres-url", default=None, help="PostgreSQL server (default CHATLAB_TEST_POSTGRES_URL)")
    parser.add_argument("--redis-url", default=None, help="Redis server (default CHATLAB_TEST_REDIS_URL)")
    parser.add_argument(
        "--load",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="load generator: wrk if installed (auto), or the built-in Python one",
    )
