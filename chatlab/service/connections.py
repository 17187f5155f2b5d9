"""Bounds on connections, for uvicorn: idle and slow clients time out, and open connections are capped.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` and answers 503 past
``limit_concurrency`` open connections, but it waits for a request's headers for ever: a client
that opens sockets and sends nothing, or sends a header byte now and then, holds them all (and,
past the cap, locks everyone else out). :func:`bounded_protocol` adds that deadline to uvicorn's
own HTTP protocol class: from a connection's opening (or its previous answer) a request's headers
must arrive within ``header_timeout``, else the connection is closed (with a 408 if part of a
request came); and a request's body, once its headers are in, within ``body_timeout``, else it is
answered 408 and the connection closed.

The body's deadline is kept here, not where the app reads the body, because here it costs nothing
for the usual request: one whose body arrived with its headers (as a small JSON body does) never
arms a timer; an ``asyncio.timeout`` around every read of a body was about a tenth of an append's
CPU. Under another server than chatlab's (``serve``, :func:`~chatlab.service.start_service`), that
server's own timeouts apply.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from ..serverstack import server_stack
from .settings import ServiceSettings


def server_options(settings: ServiceSettings, http: str | None = None) -> dict[str, Any]:
    """The :class:`uvicorn.Config` options that enforce the settings' connection bounds, on the HTTP protocol
    ``http`` (default: the server stack's, :mod:`chatlab.serverstack`); they override the stack's ``http``."""
    http = http or server_stack().http
    return {
        "timeout_keep_alive": settings.keep_alive_timeout,
        # uvicorn counts the connection a request came on: at N it refuses the N-th, so N + 1 serves N
        "limit_concurrency": settings.max_connections + 1,
        "http": bounded_protocol(http, settings.header_timeout, settings.body_timeout),
    }


@functools.cache  # one class per choice: equal settings give equal server options (see BackgroundServer.ensure)
def bounded_protocol(http: str, header_timeout: float, body_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ``http`` ("auto", "h11", "httptools") with deadlines on each request's headers
    and body."""
    base: type[Any] = import_from_string(HTTP_PROTOCOLS[http])
    timeout = _timeout_response(
        f"the request's headers did not arrive within {header_timeout:g} s; send a request at once"
    )
    body_late = _timeout_response(f"the body did not arrive within {body_timeout:g} s: send it at once")

    class HeaderDeadline(base):  # type: ignore[misc]  # uvicorn picks the base class at run time
        """Close a connection whose next request's headers, or whose request's body, are not all in in time."""

        _deadline: asyncio.TimerHandle | None = None
        _body_deadline: asyncio.TimerHandle | None = None
        _partial = False
        _since = 0.0  # when the connection opened or last answered
        _since_cycle: Any = None  # the request cycle then (None before the first)

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(OneSend(transport, self.loop))
            self._start_wait()

        def data_received(self, data: bytes) -> None:
            self._partial = True
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_complete:
                if self._body_deadline is None:  # headers in, body not: from now on it has body_timeout
                    self._body_deadline = self.loop.call_later(body_timeout, self._body_expired, cycle)
            elif self._body_deadline is not None:
                self._body_deadline.cancel()
                self._body_deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._start_wait()

        def connection_lost(self, exc: Exception | None) -> None:
            for deadline in (self._deadline, self._body_deadline):
                if deadline is not None:
                    deadline.cancel()
            super().connection_lost(exc)

        def _start_wait(self) -> None:
            """From now on the next request's headers have ``header_timeout``.

            One timer per connection, moved only when it fires (:meth:`_expire`): cancelling and setting one
            on every answer was a fiftieth of the service's CPU per request.
            """
            self._partial = False
            self._since, self._since_cycle = self.loop.time(), self.cycle
            if self._deadline is None:
                self._deadline = self.loop.call_at(self._since + header_timeout, self._expire)

        def _expire(self) -> None:
            """Close the connection if no request began since the wait started and the wait is over."""
            self._deadline = None
            cycle = self.cycle
            if self.transport.is_closing() or cycle is not self._since_cycle:
                return  # a request began since: its answer starts the next wait
            if cycle is not None and not cycle.response_complete:
                return  # the request of this wait runs: its answer starts the next wait
            due = self._since + header_timeout
            if due > self.loop.time():  # the wait started again after the timer was set
                self._deadline = self.loop.call_at(due, self._expire)
                return
            if self._partial:
                self.transport.write(timeout)
            self.transport.close()

        def _body_expired(self, cycle: Any) -> None:
            """``cycle``'s body is still not all in: answer 408 (unless the app answered already) and close.

            The app, waiting for the rest, is told the client is gone and its answer goes nowhere; nothing
            was written, since a write's messages are read whole before anything is stored."""
            self._body_deadline = None
            if cycle.more_body and not cycle.response_complete and not self.transport.is_closing():
                if not cycle.response_started:
                    self.transport.write(body_late)
                self.transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


class OneSend:
    """The connection's transport, which sends an answer's head and body together: one system call, not two.

    uvicorn writes an answer's head when the app starts it and its body when the app sends it, each a ``write`` the
    transport sends at once (uvloop tries the socket on every write): two ``send`` calls for each small answer, a
    third of a memory-store read's CPU in the service (py-spy under wrk). Here a write is held until the next one,
    which goes out with it, or until the loop's turn ends (nothing is held longer: a streamed answer's head is not
    delayed); closing sends what is held first. A head that says ``content-length: 0`` (an append's ``202``) has
    nothing to wait for and goes at once, and uvicorn's empty body after it is no write: holding it cost every
    append a callback on the loop. Sending at once is always correct; holding is only the saving. Everything else
    is the transport's own.
    """

    __slots__ = ("_held", "_loop", "_transport")

    #: A body this large is sent after the held head rather than copied onto it.
    JOIN_LIMIT = 65_536
    #: A write shorter than this may be a head that says no body follows (:data:`_NO_BODY`).
    HEAD_LIMIT = 4_096

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            if not data:  # uvicorn's empty body after a head already sent: nothing to send
                return
            if len(data) < self.HEAD_LIMIT and _NO_BODY in data:  # an append's 202: no body follows
                self._transport.write(data)
                return
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            if len(data) > self.JOIN_LIMIT:
                self._transport.write(held)
                self._transport.write(data)
            else:
                self._transport.write(held + data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def flush(self) -> None:
        """Send what is held (if anything)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        """Asked twice per request (by uvicorn and :func:`bounded_protocol`): passed on without ``__getattr__``,
        which runs only after the ordinary lookup has failed, at the cost of an ``AttributeError`` (0.35 µs)."""
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


#: In a head, the line of an answer without a body (uvicorn writes header names in lower case).
_NO_BODY = b"\r\ncontent-length: 0\r\n"


def _timeout_response(detail: str) -> bytes:
    """A 408 problem JSON that closes the connection, written as raw bytes (past the app)."""
    body = json.dumps({"title": "Request Timeout", "status": 408, "detail": detail}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
