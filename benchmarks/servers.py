"""The servers the benchmark measures, each in a process of its own on a free loopback port.

The service is started exactly as a user starts it, ``python -m chatlab serve`` (quiet: no
access log), with only the store, the port and the log level given; every other ``CHATLAB_*``
setting of the environment is left out, so it is the article's open service (API keys or a
rate limit would change what is measured). The ceiling, the FastAPI floor, the baselines and the listing service
run under ``uvicorn.run`` with the stack's options (``python -m benchmarks --serve-child``).
Each process gets the server stack by ``CHATLAB_SERVER_STACK``, which every chatlab server reads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from chatlab.serverstack import STACK_VARIABLE, server_stack

if TYPE_CHECKING:
    from chatlab.stores import ChatHistoryStore

ROOT = Path(__file__).resolve().parent.parent
"""The clone's root, where ``benchmarks`` is importable from."""


def serve_child(argv: Sequence[str]) -> None:
    """Entry point of a child: ``--target ceiling|floor|baseline|listing --port N`` and the target's options."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks --serve-child")
    parser.add_argument("--target", choices=["ceiling", "floor", "baseline", "listing"], required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--read-body", help="ceiling and floor: the file of the read's answer")
    parser.add_argument("--store", help="baseline: memory, sqlite, postgresql or redis")
    parser.add_argument("--url", help="baseline: where it keeps its data")
    parser.add_argument("--conversations", type=int, help="listing: conversations stored before it serves")
    parser.add_argument("--namespaced", type=int, default=0, help="listing: namespaced conversations beside them")
    args = parser.parse_args(argv)
    import uvicorn

    app: Any
    if args.target == "ceiling":
        from .ceiling import ceiling_app

        app = ceiling_app(Path(args.read_body).read_bytes())
    elif args.target == "floor":
        from .ceiling import floor_app

        app = floor_app(Path(args.read_body).read_bytes())
    elif args.target == "baseline":
        from .baselines import baseline_app

        app = baseline_app(args.store, args.url)
    else:
        from chatlab.serverstack import freeze_startup_objects
        from chatlab.service import create_app

        freeze_startup_objects()  # as ``chatlab serve`` does, before the conversations it will serve arrive
        app = create_app(asyncio.run(filled_store(args.conversations, args.namespaced)))
    options = server_stack().uvicorn_options()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, **options)


async def filled_store(conversations: int, namespaced: int = 0) -> ChatHistoryStore:
    """An in-memory store holding ``conversations`` conversations of one turn each and ``namespaced`` more in
    namespaces (the store's own API)."""
    from chatlab.stores import open_store

    from .workload import compact, conversation_key, namespaced_key, sample_turn

    store = open_store("memory://")
    turn = [compact(m) for m in sample_turn(0)]
    for i in range(conversations):
        await store.append(conversation_key(i), turn)
    for n in range(namespaced):
        await store.append(namespaced_key(n, conversations), turn)
    return store


def free_port() -> int:
    """A loopback port nobody listens on (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A server in a child process: ``service`` (``chatlab serve``) or a ``--serve-child`` target."""

    def __init__(self, target: str, stack: str, *, store: str | None = None, child: Sequence[str] = ()) -> None:
        self.target = target
        port = free_port()
        if target == "service":
            args = ["-m", "chatlab", "serve", "--port", str(port), "--log-level", "warning"]
            args += ["--store", store or "memory://", *child]
        else:
            args = ["-m", "benchmarks", "--serve-child", "--target", target, "--port", str(port), *child]
        self.process = subprocess.Popen(
            [sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_child_env(stack), cwd=ROOT
        )
        self.pid = self.process.pid
        self.url = f"http://127.0.0.1:{port}"
        self._wait_answering()

    def _wait_answering(self) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise RuntimeError(f"the {self.target} server is not answering at {self.url}: {err.strip()[-2000:]}")
            time.sleep(0.05)

    def rss(self) -> int:
        """The process's resident memory in bytes (Linux ``/proc``)."""
        pages = int(Path(f"/proc/{self.pid}/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")

    def cpu_seconds(self) -> float:
        """The CPU time the process has used so far, user and system, all its threads (Linux ``/proc``)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15

    def stop(self) -> None:
        """End the child (terminate, then kill after 10 s); stopping twice is harmless."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stderr:
            self.process.stderr.close()

    def __enter__(self) -> ServerProcess:
        """The server, already answering."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the server."""
        self.stop()


def _child_env(stack: str) -> dict[str, str]:
    """This environment without chatlab's service settings, with the stack, and ``benchmarks`` importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLAB_")}
    env[STACK_VARIABLE] = stack
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
