"""``python -m chatlab``: run the chat history service or the article's demo from a terminal."""

from __future__ import annotations

import argparse
import errno
import re
import socket
import sys
from collections.abc import Callable, Sequence

import uvicorn
from pydantic import ValidationError

from .operations.commands import add_commands
from .serverstack import freeze_startup_objects, server_stack
from .service import create_app
from .service.security.auth import NAMESPACE_PATTERN, new_api_key
from .service.server_options import server_options
from .service.settings import ServiceSettings, add_flags, describe_error, format_duration, settings_from_flags
from .stores import describe_url

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _settings(args: argparse.Namespace) -> ServiceSettings:
    """``serve``'s settings: its flags over the environment; the viewer is off beyond loopback unless asked."""
    return settings_from_flags(args, defaults=None if args.host in LOOPBACK else {"viewer": False})


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    taken = _port_taken(args.host, args.port)
    if taken is not None:  # said before any banner, without uvicorn's traceback
        print(f"error: {taken}", file=sys.stderr)
        return 1
    if args.host not in settings.allowed_hosts:  # the name it is started with is one it serves
        settings = settings.model_copy(update={"allowed_hosts": (*settings.allowed_hosts, args.host)})
    app = create_app(args.store, settings)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"{'https' if settings.tls_cert else 'http'}://{host}:{args.port}"
    print(f"Chat history service on {url} (store: {describe_url(args.store)}); Ctrl+C stops it.")
    print(f"Server: uvicorn ({server_stack()}); access log {'on' if settings.access_log else 'off'}.")
    print(f"Protections: {_describe(settings)}.")
    if settings.viewer:
        print(f"Conversation viewer: {url}/ui (read-only; --no-viewer turns it off).")
    if args.host not in LOOPBACK:
        if settings.api_keys is None:
            warn = "Warning: listening beyond loopback without API keys: anyone who reaches it reads and writes."
            print(warn, file=sys.stderr)
        if not settings.tls_cert:
            warn = "Warning: listening beyond loopback without TLS: messages and keys travel in clear text."
            print(warn, file=sys.stderr)
    # out now, not when the buffer fills: a log shows the address at once, and a stop by SIGTERM (which uvicorn
    # raises again after shutting down, ending the process without flushing) loses nothing
    sys.stdout.flush()
    tls = {"ssl_certfile": settings.tls_cert, "ssl_keyfile": settings.tls_key}
    config = {**tls, **server_stack().uvicorn_options(), **server_options(settings)}
    freeze_startup_objects()
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=settings.access_log, **config)
    return 0


def _port_taken(host: str, port: int) -> str | None:
    """Why ``serve`` cannot listen on ``host:port``, or ``None``: tried with a socket bound and closed at once, as
    uvicorn will bind it (``SO_REUSEADDR``), so the message comes before anything starts."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {host!r}: {exc.strerror}; give --host an address of this machine"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return (
                        f"port {port} on {host} is already in use (another chatlab serve?): stop that server, "
                        f"or choose another port, e.g. --port {port + 1 if port < 65535 else 5001}"
                    )
                return f"cannot listen on {host}:{port}: {exc.strerror}"
    return None


def _describe(settings: ServiceSettings) -> str:
    parts = [
        f"API keys for namespaces {', '.join(settings.api_keys.namespaces)}" if settings.api_keys else "no API keys",
        f"CORS for {', '.join(settings.cors_origins)}" if settings.cors_origins else "no CORS",
        f"rate limit {settings.rate_limit}" if settings.rate_limit else "no rate limit",
        "TLS" if settings.tls_cert else "no TLS",
        f"body <= {settings.max_body_bytes} bytes, <= {settings.max_messages} messages per request",
    ]
    if settings.retention is not None:
        parts.append(f"conversations not written for {format_duration(settings.retention)} are deleted")
    if settings.metrics:
        parts.append("Prometheus metrics at /metrics")
    return "; ".join(parts)


def _api_key(args: argparse.Namespace) -> int:
    if not re.fullmatch(NAMESPACE_PATTERN, args.namespace):
        raise ValueError("the namespace must be 1 to 64 letters, digits, '_' or '-'")
    print(f"{args.namespace}:{new_api_key()}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from .client.errors import ChatlabError
    from .tutorial.demo import run_demo

    try:
        demo = run_demo(args.pause, args.service_url, args.llm, args.runs, max_output_tokens=args.max_output_tokens)
        asyncio.run(demo)
    except ChatlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _llm_check(args: argparse.Namespace) -> int:
    import asyncio

    from .tutorial.model_check import run_check

    return asyncio.run(run_check(args.url, args.model, args.max_output_tokens))


def _max_output_tokens(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-output-tokens",
        type=int,
        default=5000,
        metavar="N",
        help="the most tokens one model call may generate (default: the article's 5000; less for a slow local model)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``chatlab`` command line: its subcommands and their flags."""
    parser = argparse.ArgumentParser(prog="python -m chatlab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the chat history service in the foreground",
        description="Run the chat history service. Every protection is off unless given (docs/protections.md); "
        "each option also has an environment variable.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=5000, help="port (default 5000, as in the article)")
    serve.add_argument(
        "--store",
        help="where to keep history (default memory://): sqlite:///history.db or a file path, "
        "postgresql://user@host/db, redis://host:6379/0 (see docs/stores.md)",
    )
    add_flags(serve)
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(run=_serve)
    add_commands(commands)

    api_key = commands.add_parser("api-key", help="print a new NAMESPACE:KEY entry for an API keys file")
    api_key.add_argument("namespace", help="the namespace of conversations the key may use")
    api_key.set_defaults(run=_api_key)

    demo = commands.add_parser("demo", help="run the article's agent scenario twice against one service")
    demo.add_argument(
        "--pause", type=float, default=10.0, help="seconds between the two time prompts (default: the article's 10)"
    )
    demo.add_argument(
        "--service-url",
        help="a running service (default: CHAT_HISTORY_SERVICE_URL, else one started in the background)",
    )
    demo.add_argument(
        "--llm", choices=["auto", "offline", "endpoint"], help="which LLM (default: CHATLAB_LLM, else auto)"
    )
    demo.add_argument("--runs", type=int, default=2, help="how many runs against the same service (default 2)")
    _max_output_tokens(demo)
    demo.set_defaults(run=_demo)

    llm = commands.add_parser("llm", help="check the LLM the tutorial would use").add_subparsers(
        dest="llm_command", required=True, metavar="COMMAND"
    )
    check = llm.add_parser(
        "check",
        help="can this model and server run the article? (docs/llm.md)",
        description="Send the article's requests (a plain chat, the GetDateTime tool call and its result, a bounded "
        "answer) to an OpenAI-compatible server and say whether the model can run the article; exit status 1 if not.",
    )
    check.add_argument("url", nargs="?", help="the server's base URL (default: OPENAI_BASE_URL, else LM Studio's)")
    check.add_argument("--model", help="the model (default: OPENAI_CHAT_COMPLETION_MODEL, else the article's)")
    _max_output_tokens(check)
    check.set_defaults(run=_llm_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chatlab`` command ``argv`` (by default the process's arguments); its exit status."""
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except ValueError as exc:  # a bad option value, or a bad setting (a ValidationError, named): no traceback
        print(f"error: {describe_error(exc) if isinstance(exc, ValidationError) else exc}", file=sys.stderr)
        return 2
