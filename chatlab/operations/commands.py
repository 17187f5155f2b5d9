"""``chatlab export``, ``chatlab import`` and ``chatlab migrate`` on the command line (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from ..vocabulary import API_KEY_VARIABLE


def _where(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "--store", default=None, metavar="URL", help=f"{verb} a store directly (sqlite, postgresql, redis)"
    )
    parser.add_argument("--url", default=None, help=f"{verb} a running service, e.g. http://localhost:5000")
    parser.add_argument(
        "--api-key", default=None, help=f"the service's API key, when it has keys on (default: {API_KEY_VARIABLE})"
    )


def _place(args: argparse.Namespace) -> Any:
    from .places import open_place

    return open_place(args.store, args.url, args.api_key or os.environ.get(API_KEY_VARIABLE) or None)


def _export(args: argparse.Namespace) -> int:
    from .exporter import export_conversations

    async def run() -> int:
        place = _place(args)
        try:
            if args.output == "-":
                return await export_conversations(place, sys.stdout.buffer, args.key)
            with open(args.output, "wb") as out:
                return await export_conversations(place, out, args.key)
        finally:
            await place.close()

    count = asyncio.run(run())
    print(f"exported {count} conversations", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from .importer import import_conversations

    async def run() -> Any:
        place = _place(args)
        try:
            if args.file == "-":
                return await import_conversations(place, sys.stdin.buffer, args.existing)
            with open(args.file, "rb") as lines:
                return await import_conversations(place, lines, args.existing)
        finally:
            await place.close()

    report = asyncio.run(run())
    for bad in report.bad_lines:
        print(f"error: {args.file}: {bad}", file=sys.stderr)
    print(f"imported: {report}", file=sys.stderr)
    return 1 if report.bad_lines else 0


def _migrate(args: argparse.Namespace) -> int:
    from .migrate import migrate, terminal_progress

    update, stop = terminal_progress()
    try:
        report = asyncio.run(
            migrate(args.source, args.target, batch=args.batch, overwrite=args.overwrite, progress=update)
        )
    finally:
        stop()
    print(report, file=sys.stderr)
    for key in report.mismatches[:20]:
        print(f"differs: {key!r}", file=sys.stderr)
    return 1 if report.mismatches else 0


def add_commands(commands: Any) -> None:
    """Add ``export``, ``import`` and ``migrate`` to the CLI's subcommands."""
    export = commands.add_parser(
        "export", help="write conversations as JSON Lines (a backup), from a store or a service"
    )
    _where(export, "read")
    export.add_argument("--key", action="append", default=None, help="only this conversation (repeatable)")
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
    load.set_defaults(run=_import)

    move = commands.add_parser("migrate", help="copy every conversation to another store, resumably, then verify")
    move.add_argument("--from", dest="source", required=True, metavar="URL", help="the store to copy from")
    move.add_argument("--to", dest="target", required=True, metavar="URL", help="the store to copy into")
    move.add_argument("--batch", type=int, default=200, help="conversations per write (default 200)")
    move.add_argument(
        "--overwrite", action="store_true", help="replace conversations the target holds at other versions"
    )
    move.set_defaults(run=_migrate)
