"""The servers the benchmark measures, each in a process of its own on a free loopback port.

The service is started exactly as a user starts it, ``python -m chatlab serve`` (quiet: no
access log), with only the store, the port and the log level given; every other ``CHATLAB_*``
setting of the environment is left out, so it is the article's open service (API keys or a
rate limit would change what is measured). The ceiling and the limit run under
``uvicorn.run`` with the same options ``serve`` passes. Each process gets the server stack
by ``CHATLAB_SERVER_STACK``, the one place every chatlab server reads it from.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from ..serverstack import STACK_VARIABLE


def serve_child(argv: Sequence[str]) -> None:
    """Entry point of a ceiling or limit process: ``--target ceiling|limit --read-body FILE --port N``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", choices=["ceiling", "limit"], required=True)
    parser.add_argument("--read-body", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    import uvicorn

    from ..serverstack import server_stack
    from .ceiling import ceiling_app, limit_app

    read_body = Path(args.read_body).read_bytes()
    app = ceiling_app(read_body) if args.target == "ceiling" else limit_app(read_body)
    options = server_stack().uvicorn_options()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, **options)


def free_port() -> int:
    """A loopback port nobody listens on (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """The service (``target="service"``), the ceiling or the limit, on ``stack``, in a child process."""

    def __init__(self, target: str, stack: str, *, store: str | None = None, read_body: Path | None = None) -> None:
        self.target = target
        port = free_port()
        if target == "service":
            args = ["-m", "chatlab", "serve", "--port", str(port), "--log-level", "warning"]
            args += ["--store", store or "memory://"]
        else:
            args = ["-m", "chatlab.bench", "--serve-child", "--target", target, "--read-body", str(read_body)]
            args += ["--port", str(port)]
        self.process = subprocess.Popen(
            [sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_child_env(stack)
        )
        self.pid = self.process.pid
        self.url = f"http://127.0.0.1:{port}"
        self._wait_answering()

    def _wait_answering(self) -> None:
        deadline = time.monotonic() + 30
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
        """The process's resident memory in bytes (Linux ``/proc``; psutil elsewhere)."""
        try:
            pages = int(Path(f"/proc/{self.pid}/statm").read_text().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            import psutil  # type: ignore[import-untyped,unused-ignore]  # only off Linux; no stubs installed

            return int(psutil.Process(self.pid).memory_info().rss)

    def stop(self) -> None:
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
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _child_env(stack: str) -> dict[str, str]:
    """This environment without chatlab's service settings, with the stack, and the package importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLAB_")}
    env[STACK_VARIABLE] = stack
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env
