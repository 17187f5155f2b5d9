"""What uvicorn does not bound itself (https://github.com/Kludex/uvicorn/issues/157; docs/protections.md, "Connections
and the store are bounded"): a request head's time and size while it arrives, and which connections hold the slots.
uvicorn's ``limit_concurrency`` would not do for the slots: it counts the connections just closed to make room and
refuses their replacement."""

from __future__ import annotations

import asyncio
import functools
import json
import weakref
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from ..serverstack import server_stack
from .settings import ServiceSettings

#: The largest request head: well above the app's own limits (:mod:`.heads`), so a head it would answer is never cut.
MAX_HEAD_BYTES = 64 * 1024


def server_options(settings: ServiceSettings) -> dict[str, Any]:
    """The :class:`uvicorn.Config` options that enforce the settings' connection bounds."""
    return {
        "timeout_keep_alive": settings.keep_alive_timeout,
        "http": guarded_protocol(server_stack().http, settings.header_timeout, settings.max_connections),
        # h11's own bound on a head arriving in pieces (16 KiB by default), made the same as httptools' here
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }


@dataclass
class _Waiting:
    """The connections of one server that wait for a request's head (the longest-waiting first), and those open."""

    connections: dict[Any, None] = field(default_factory=dict)
    open: set[Any] = field(default_factory=set)  # not those being closed to make room


#: Per uvicorn server (its shared ``ServerState``, which every protocol instance is given).
_SERVERS: weakref.WeakKeyDictionary[Any, _Waiting] = weakref.WeakKeyDictionary()


@functools.cache  # one class per choice: equal settings give equal server options (see BackgroundServer.ensure)
def guarded_protocol(http: str, header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ``http`` with a deadline and a size bound on each request's head, and fair slots."""
    base: type[Any] = import_from_string(HTTP_PROTOCOLS[http])  # as uvicorn.Config finds it
    late = _problem(408, f"the request's head did not arrive within {header_timeout:g} s")
    full = _problem(503, f"every one of the {max_connections} connections serves a request: retry later")
    large = _problem(431, f"the request's head is over {MAX_HEAD_BYTES} bytes: send less")

    class GuardedProtocol(base):  # type: ignore[misc]  # the base class is chosen at run time
        def __init__(self, config: Any, server_state: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(config, server_state, *args, **kwargs)
            self.guard_server = _SERVERS.setdefault(server_state, _Waiting())
            self.guard_timer: asyncio.TimerHandle | None = None
            self.guard_head: int | None = 0  # bytes of the head arriving; None: a request is being served
            self.guard_tail = b""  # the last bytes seen, for a blank line split between two reads
            self.guard_since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)  # the base keeps self.transport (and self.loop)
            server = self.guard_server
            server.open.add(self)
            if len(server.open) > max_connections and server.connections:  # the longest waiter makes room
                oldest = next(iter(server.connections))
                oldest.guard_close(late if oldest.guard_head else None)
            self.guard_wait()

        def data_received(self, data: bytes) -> None:
            if self.guard_head is not None and not self.guard_seen(data):
                return
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self.guard_wait()

        def connection_lost(self, exc: Exception | None) -> None:
            self.guard_uncount()
            if self.guard_timer is not None:
                self.guard_timer.cancel()
                self.guard_timer = None
            super().connection_lost(exc)

        def guard_wait(self) -> None:
            """From now on the next request's head has ``header_timeout``; this connection waits for it."""
            self.guard_head, self.guard_tail = 0, b""
            self.guard_since = self.loop.time()
            self.guard_server.connections.pop(self, None)
            self.guard_server.connections[self] = None  # the newest waiter
            if self.guard_timer is None:  # one timer per connection, moved only when it fires
                self.guard_timer = self.loop.call_at(self.guard_since + header_timeout, self.guard_expire)

        def guard_seen(self, data: bytes) -> bool:
            """Count a head's bytes; ``False`` when the head is over the limit (answered 431 and closed)."""
            seen = self.guard_tail + data
            ends = [at + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (at := seen.find(mark)) >= 0]
            arrived = (min(ends) if ends else len(seen)) - len(self.guard_tail)
            size = (self.guard_head or 0) + arrived
            if size > MAX_HEAD_BYTES:
                self.guard_close(large)
                return False
            if ends:  # the head is in: the request is the app's now, if there is room
                self.guard_head = None
                self.guard_server.connections.pop(self, None)
                if len(self.guard_server.open) > max_connections:
                    self.guard_close(full)
                    return False
            else:
                self.guard_head, self.guard_tail = size, seen[-3:]
            return True

        def guard_expire(self) -> None:
            """Close the connection if it still waits for a head and its time is up."""
            self.guard_timer = None
            if self.guard_head is None:
                return  # a request is served: its answer starts the next wait
            due = self.guard_since + header_timeout
            if due > self.loop.time():  # the wait started again after the timer was set
                self.guard_timer = self.loop.call_at(due, self.guard_expire)
                return
            self.guard_close(late if self.guard_head else None)

        def guard_uncount(self) -> None:
            """Leave the server's open connections and its waiters."""
            self.guard_server.connections.pop(self, None)
            self.guard_server.open.discard(self)

        def guard_close(self, answer: bytes | None) -> None:
            """Close the connection, with ``answer`` first (written as raw bytes: no request reached the app)."""
            self.guard_uncount()
            if not self.transport.is_closing():
                if answer is not None:
                    self.transport.write(answer)
                self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def _problem(status: int, detail: str) -> bytes:
    """A problem JSON answer that closes the connection, as raw bytes."""
    title = HTTPStatus(status).phrase
    body = json.dumps({"title": title, "status": status, "detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {title}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
