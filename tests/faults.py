"""Faults between a client and a live service, for tests: a TCP proxy that loses answers, a flaky gateway."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence
from typing import Any


class DroppingProxy:
    """A TCP proxy to ``upstream`` that drops the answers to the first ``drops`` requests starting with ``method``.

    For such a request it forwards everything, waits until the service starts answering (the
    service answers a write after its store committed it), and closes both connections without
    forwarding a byte of the answer. Requests are recognised by their first bytes, which is
    enough for the sequential HTTP/1.1 requests of one client.
    """

    def __init__(self, upstream_port: int, method: bytes = b"POST ", drops: int = 1) -> None:
        self.upstream_port = upstream_port
        self.method = method
        self.drops = drops
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _take_drop(self) -> bool:
        with self._lock:
            if self.drops > 0:
                self.drops -= 1
                return True
            return False

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        self._open |= {client, upstream}
        dropping = threading.Event()

        def close() -> None:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

        def to_upstream() -> None:
            try:
                while data := client.recv(65536):
                    if data.startswith(self.method) and self._take_drop():
                        dropping.set()  # before forwarding: the answer cannot come back first
                    upstream.sendall(data)
            except OSError:
                pass
            close()

        def to_client() -> None:
            try:
                while data := upstream.recv(65536):
                    if dropping.is_set():
                        with self._lock:
                            self.dropped += 1
                        break  # the service has answered, so it has stored: lose the answer
                    client.sendall(data)
            except OSError:
                pass
            close()

        threading.Thread(target=to_upstream, daemon=True).start()
        to_client()

    def close(self) -> None:
        self._listener.close()
        for sock in list(self._open):
            sock.close()


class FlakyGateway:
    """ASGI middleware in front of the real service: answers the first requests with the given statuses."""

    def __init__(self, app, statuses: Sequence[int], retry_after: str | None = None) -> None:
        self.app = app
        self.statuses = list(statuses)
        self.retry_after = retry_after
        self.seen = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and self.statuses:
            self.seen += 1
            status = self.statuses.pop(0)
            headers = [(b"content-type", b"text/plain")]
            if self.retry_after is not None:
                headers.append((b"retry-after", self.retry_after.encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b"try again"})
            return
        await self.app(scope, receive, send)


class PausableProxy:
    """A TCP proxy to ``127.0.0.1:upstream_port`` that can stop forwarding (``pause``) and start again
    (``resume``): to the client, the server behind it stops answering without closing anything."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._running = threading.Event()
        self._running.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._open += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._running.wait()  # paused: hold the bytes
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._running.set()
        self._listener.close()
        for sock in self._open:
            sock.close()


def lossy_gateway(upstream: str, *, lose_appends: bool = False, forget_reads: bool = False) -> Any:
    """An ASGI gateway to the service at ``upstream`` that forwards everything except what it is told to lose.

    ``lose_appends``: a ``POST`` gets ``202 Accepted`` with its ``Location``, and is never sent on.
    ``forget_reads``: a ``GET`` of one conversation answers ``[]`` (no ``ETag``), whatever it holds.
    Run it with :class:`chatlab.runner.BackgroundServer`.
    """
    from contextlib import asynccontextmanager

    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    client = httpx.AsyncClient(base_url=upstream)
    passed = ("content-type", "etag", "location", "link", "x-message-count", "retry-after")

    async def forward(request: Request) -> Response:
        path = request.url.path
        if lose_appends and request.method == "POST":
            return Response(status_code=202, headers={"Location": path})
        if forget_reads and request.method == "GET" and path.startswith("/chat-history/"):
            return JSONResponse([])
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        answer = await client.request(
            request.method, path, params=request.query_params, content=await request.body(), headers=headers
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() in passed}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        yield
        await client.aclose()

    methods = ["GET", "HEAD", "POST", "PUT", "DELETE"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)
