"""``chatlab export``, ``chatlab import`` and ``chatlab migrate`` on the command line (docs/operations.md).

Every failure ends in one line on stderr that says what was done and what to run next, and exit status 1 when
something was left out (bad lines, conversations that differ), 2 for a usage error (nothing done), 3 when the
command stopped part-way (running it again finishes the job), 130 when it was interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from ..vocabulary import API_KEY_VARIABLE

STOPPED = 3
INTERRUPTED = 130


def _where(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--store", metavar="URL", help=f"{verb} a store directly (sqlite, postgresql, redis)")
    parser.add_argument("--url", help=f"{verb} a running service, e.g. http://localhost:5000")
    parser.add_argument("--api-key", help=f"the service's API key, when it has keys on (default: {API_KEY_VARIABLE})")
    parser.add_argument(
        "--namespace",
        metavar="NAME",
        help="with --store: the conversations of one API key namespace, keys as its clients send them "
        "(default: the conversations outside any namespace)",
    )


def _place(args: argparse.Namespace) -> Any:
    from .places import open_place

    return open_place(args.store, args.url, args.api_key or os.environ.get(API_KEY_VARIABLE) or None, args.namespace)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """``kill`` (SIGTERM) ends the command like Ctrl+C, so it can still say how far it got."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _progress(seen: list[int], every: float = 2.0) -> Iterator[Callable[[int, int], None]]:
    """Progress on stderr (the latest figures kept in ``seen``): a bar on a terminal, else a line at most every
    ``every`` seconds, so a log shows how far a run got even when it is killed."""
    last, bar = [0.0], None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = TextColumn("migrating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()
        bar = Progress(*columns, console=Console(stderr=True))
        task = bar.add_task("migrate", total=None)

    def update(done: int, total: int) -> None:
        seen[:] = [done, total]
        if bar is not None:
            bar.update(task, completed=done, total=total)
        elif time.monotonic() - last[0] >= every or done == total:
            last[0] = time.monotonic()
            _say(f"migrate: {done} of {total} conversations in the target")

    with bar if bar is not None else nullcontext():
        yield update


def _export(args: argparse.Namespace) -> int:
    from .exporter import export_conversations
    from .places import PlaceError, PlaceUnavailable, StorePlace

    async def run() -> tuple[int, tuple[int, list[str]]]:
        place = _place(args)
        try:
            left_out = await place.left_out() if isinstance(place, StorePlace) and args.key is None else (0, [])
            with open(args.output, "wb") if args.output != "-" else nullcontext(sys.stdout.buffer) as out:
                return await export_conversations(place, out, args.key), left_out
        finally:
            await place.close()

    try:
        count, left_out = asyncio.run(run())
    except OSError as exc:  # the output file
        raise ValueError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    except (PlaceError, PlaceUnavailable) as exc:
        _say(f"error: export stopped: {exc}; the output is incomplete: run the same command again")
        return STOPPED
    _say(f"exported {count} conversations")
    left, spaces = left_out
    if left:
        within = f"namespaces {', '.join(spaces)}" if not args.namespace else "other namespaces"
        _say(
            f"note: {left} conversations of {within} left out: export each with --namespace NAME "
            "(or copy the whole store with chatlab migrate)"
        )
    return 0


def _import(args: argparse.Namespace) -> int:
    from .importer import ImportReport, default_line_limit, import_conversations

    limit = args.max_line_bytes if args.max_line_bytes is not None else default_line_limit()
    if limit < 1:
        raise ValueError(f"--max-line-bytes must be 1 or more, not {limit}")
    if args.strict and args.file == "-":
        raise ValueError("--strict reads the file twice (check, then write): give a file, not - (standard input)")

    async def run() -> ImportReport:
        place = _place(args)
        try:  # not --strict with standard input (refused above)
            with open(args.file, "rb") if args.file != "-" else nullcontext(sys.stdin.buffer) as lines:
                return await import_conversations(place, lines, args.existing, limit=limit, strict=args.strict)
        finally:
            await place.close()

    try:
        report = asyncio.run(run())
    except OSError as exc:  # the file: missing, a directory, not readable
        raise ValueError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        _say("import: interrupted; run the same command again to finish (what is in already changes nothing)")
        return INTERRUPTED
    for bad in report.bad_lines:
        _say(f"error: {args.file}: {bad}")
    if report.checked_only:
        _say(f"import: nothing written (--strict): {len(report.bad_lines)} bad lines; fix them and run it again")
        return 1
    _say(f"import: {report}")
    if report.stopped is not None:
        _say(
            f"error: import stopped at line {report.stopped_at}: {report.stopped}; nothing of line "
            f"{report.stopped_at} on was written; run the same command again to finish (what is in changes nothing)"
        )
        return STOPPED
    return 1 if report.bad_lines else 0


def _migrate(args: argparse.Namespace) -> int:
    from ..stores import describe_url
    from .migrate import MigrationStopped, migrate

    where = f"from {describe_url(args.source)} to {describe_url(args.target)}"
    _say(f"migrate: {where}; if it is interrupted, run the same command again: it finishes the job")
    seen = [0, 0]
    try:  # the progress bar is gone before anything below is said
        with _terminated_as_interrupt(), _progress(seen) as progress:
            work = migrate(args.source, args.target, batch=args.batch, merge=not args.no_merge, progress=progress)
            report = asyncio.run(work)
    except MigrationStopped as exc:
        _say(f"error: {exc}")
        return STOPPED
    except KeyboardInterrupt:
        _say(
            f"migrate: interrupted with at least {seen[0]} of {seen[1]} conversations in the target, each whole; "
            "run the same command again to finish"
        )
        return INTERRUPTED
    _say(f"migrate: {report}")
    behind = [key for key in report.mismatches if key not in set(report.diverged)]
    for key in behind[:20]:
        _say(f"differs: {key!r} (the target lacks some of the source's messages, or its title or tags)")
    if report.diverged:
        _say(
            f"migrate: {len(report.diverged)} conversations were written in both places and left as they were "
            f"({', '.join(map(repr, report.diverged[:5]))}{', ...' if len(report.diverged) > 5 else ''}); "
            "run the same command again without --no-merge to merge them (nothing is discarded)"
        )
    elif behind:
        _say("migrate: the source was written after the catch-up: run the same command again once its writers stop")
    return 1 if report.mismatches or report.diverged else 0


def add_commands(commands: Any) -> None:
    """Add ``export``, ``import`` and ``migrate`` to the CLI's subcommands."""
    export = commands.add_parser(
        "export", help="write conversations as JSON Lines (a backup), from a store or a service"
    )
    _where(export, "read")
    export.add_argument("--key", action="append", help="only this conversation (repeatable)")
    export.add_argument("-o", "--output", default="-", metavar="FILE", help="where to write (default: stdout)")
    export.set_defaults(run=_export)

    load = commands.add_parser("import", help="read conversations from JSON Lines into a store or a service")
    load.add_argument("file", help="the JSON Lines file (- for stdin)")
    _where(load, "write into")
    load.add_argument(
        "--existing",
        choices=["skip", "replace", "append"],
        default="skip",
        help="a conversation that already exists: leave it (default), replace it, or append to it; "
        "repeating an import changes nothing whichever",
    )
    load.add_argument("--strict", action="store_true", help="check every line first and write nothing if one is bad")
    load.add_argument(
        "--max-line-bytes",
        type=int,
        metavar="N",
        help="longest line taken (default: the service's request limit, CHATLAB_MAX_BODY_BYTES or 8 MiB); "
        "a longer one is reported and skipped, never read whole",
    )
    load.set_defaults(run=_import)

    move = commands.add_parser(
        "migrate", help="copy every conversation to another store, resumably, keeping every write, then verify"
    )
    move.add_argument("--from", dest="source", required=True, metavar="URL", help="the store to copy from")
    move.add_argument("--to", dest="target", required=True, metavar="URL", help="the store to copy into")
    move.add_argument("--batch", type=int, default=200, help="conversations per write (default 200)")
    move.add_argument(
        "--no-merge",
        action="store_true",
        help="refuse to start when a conversation was written in both places, and leave one that becomes so "
        "during the copy (default: it becomes the source's messages followed by the target's own; nothing is "
        "ever discarded)",
    )
    move.add_argument("--merge", action="store_true", help="the default (kept for scripts that give it)")
    move.add_argument("--overwrite", action="store_true", help="the old name of --merge: nothing is overwritten")
    move.set_defaults(run=_migrate)
