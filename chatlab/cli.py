"""``python -m chatlab``: run the chat history service, the article's demo, or the benchmark, from a terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .service import ServiceSettings, create_app

    settings = ServiceSettings(
        **{k: v for k, v in (("max_body_bytes", args.max_body_bytes), ("max_messages", args.max_messages)) if v}
    )
    app = create_app(args.store, settings)
    host = f"[{args.host}]" if ":" in args.host else args.host
    from .stores import describe_url

    store = describe_url(args.store)  # without a password
    print(f"Chat history service on http://{host}:{args.port} (store: {store}); Ctrl+C stops it.")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print("Warning: listening beyond loopback; the service has no authentication.", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from .demo import run_demo
    from .errors import ChatlabError

    try:
        asyncio.run(run_demo(pause=args.pause, service_url=args.service_url, llm_mode=args.llm, runs=args.runs))
    except ChatlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import config_from_args, run

    return run(config_from_args(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m chatlab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the chat history service in the foreground")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=5000, help="port (default 5000, as in the article)")
    serve.add_argument(
        "--store",
        default=None,
        help="where to keep history (default memory://): sqlite:///history.db or a file path, "
        "postgresql://user@host/db, redis://host:6379/0 (see docs/stores.md)",
    )
    serve.add_argument("--max-body-bytes", type=int, default=None, help="largest request body (default 8 MiB)")
    serve.add_argument("--max-messages", type=int, default=None, help="most messages per request (default 10000)")
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(run=_serve)

    demo = commands.add_parser("demo", help="run the article's agent scenario twice against one service")
    demo.add_argument("--pause", type=float, default=2.0, help="seconds between the two time prompts (article: 10)")
    demo.add_argument("--service-url", default=None, help="a running service (default: CHAT_HISTORY_SERVICE_URL, "
                      "else one started in the background)")
    demo.add_argument("--llm", default=None, choices=["auto", "offline", "endpoint"],
                      help="which LLM (default: CHATLAB_LLM, else auto)")
    demo.add_argument("--runs", type=int, default=2, help="how many runs against the same service (default 2)")
    demo.set_defaults(run=_demo)

    from .bench import add_arguments

    bench = commands.add_parser(
        "bench", help="measure the service against a bare FastAPI ceiling, the provider's turns, memory per message"
    )
    add_arguments(bench)
    bench.set_defaults(run=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as exc:  # bad option values: say what is wrong, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
