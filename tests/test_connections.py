"""Connections are bounded: idle, slow-header and slow-body clients are cut off, and open connections are capped.

Raw sockets against a real server on loopback; every loop is bounded, every wait has a generous timeout
(an outcome is asserted, never a duration).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service

FAST = ServiceSettings(keep_alive_timeout=0.5, header_timeout=0.5, body_timeout=0.5)
GET = b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def connect(server: BackgroundServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port or 0), timeout=30)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.fixture
def fast() -> Iterator[BackgroundServer]:
    server = start_service(settings=FAST)
    yield server
    server.stop()


def test_a_connection_that_sends_nothing_is_closed(fast: BackgroundServer) -> None:
    with connect(fast) as sock:
        assert read_until_closed(sock) == b""


def test_an_idle_keep_alive_connection_is_closed() -> None:
    server = start_service(settings=ServiceSettings(keep_alive_timeout=0.5, header_timeout=60))
    try:
        with connect(server) as sock:
            sock.sendall(GET)
            answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"[]")  # answered, then closed when idle
    finally:
        server.stop()


def test_a_busy_connection_outlives_the_header_deadline(fast: BackgroundServer) -> None:
    """The header deadline runs from each answer, not from the connection's opening: requests on one keep-alive
    connection for three times ``header_timeout`` are all answered."""
    with connect(fast) as sock:
        started = time.monotonic()
        answers = 0
        while time.monotonic() - started < 3 * FAST.header_timeout:
            sock.sendall(GET)
            answer = b""
            while not answer.endswith(b"[]"):
                chunk = sock.recv(65536)
                assert chunk, f"closed after {answers} answers"
                answer += chunk
            answers += 1
            time.sleep(0.1)
    assert answers >= 5


def test_headers_sent_a_byte_at_a_time_time_out_with_408(fast: BackgroundServer) -> None:
    with connect(fast) as sock:
        sock.sendall(b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        closed = False
        for _ in range(400):  # bounded: far more than the 0.5 s the headers may take
            try:
                sock.sendall(b"X")
            except OSError:  # the server closed the connection
                closed = True
                break
            time.sleep(0.05)
        answer = read_until_closed(sock) if not closed else b""
    assert closed or answer.startswith(b"HTTP/1.1 408 "), answer
    if answer:
        assert b"application/problem+json" in answer and b"headers did not arrive" in answer


def test_a_slow_body_gets_408_and_the_connection_is_closed(fast: BackgroundServer) -> None:
    body = b'{"messages": []}'
    with connect(fast) as sock:
        sock.sendall(
            b"POST /chat-history/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:5]
        )
        answer = read_until_closed(sock)
    head, _, detail = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer
    assert b"application/problem+json" in head and b"connection: close" in head.lower()
    assert b"did not arrive within 0.5 s" in detail
    assert httpx.get(f"{fast.url}/chat-history/k").json() == []  # nothing written


def test_connections_that_hold_every_slot_without_a_request_cannot_lock_others_out() -> None:
    """A client holding every allowed connection without sending requests (and opening more) locks nobody out: a new
    connection takes the slot of the one that has waited longest for a request, which is closed."""
    server = start_service(settings=ServiceSettings(max_connections=8, header_timeout=60))
    held: list[socket.socket] = []
    try:
        held += [connect(server) for _ in range(8)]
        for _ in range(3):  # each new connection, holder's or not, pushes out the longest waiter
            assert httpx.get(f"{server.url}/chat-history", headers={"Connection": "close"}, timeout=30).json() == []
        assert read_until_closed(held[0]) == b""  # the oldest holders were closed
        held += [connect(server) for _ in range(20)]  # the holder reconnects, again and again
        assert httpx.get(f"{server.url}/chat-history", timeout=30).status_code == 200
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_open_connections_serving_requests_over_the_cap_get_503() -> None:
    """When every slot serves a request (here: a body that has not all come), a further request gets 503."""
    server = start_service(settings=ServiceSettings(max_connections=2, header_timeout=60, body_timeout=60))
    held: list[socket.socket] = []
    head = b"POST /chat-history/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    try:
        for _ in range(2):
            sock = connect(server)
            sock.sendall(head + b"Expect: 100-continue\r\nContent-Length: 100\r\n\r\n")
            held.append(sock)
            assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")  # the app reads its body: it is being served
        over = httpx.get(f"{server.url}/chat-history", headers={"Connection": "close"}, timeout=30)
        assert over.status_code == 503
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_a_head_over_64_kib_is_cut_off_while_it_arrives(fast: BackgroundServer) -> None:
    """A head that never ends is answered 431 once 64 KiB came, not kept in memory while it grows."""
    from chatlab.service.server_protocol import MAX_HEAD_BYTES

    with connect(fast) as sock:
        sock.sendall(b"GET /chat-history HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ")
        sent, closed = 0, False
        while sent < 64 * MAX_HEAD_BYTES:  # bounded: 64 times the limit
            try:
                sock.sendall(b"a" * 8192)
            except OSError:
                closed = True
                break
            sent += 8192
        answer = b"" if closed else read_until_closed(sock)
    assert closed or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert httpx.get(f"{fast.url}/healthz", timeout=30).status_code == 200


def test_connection_settings_are_checked() -> None:
    for name in ("keep_alive_timeout", "header_timeout", "body_timeout", "store_timeout"):
        with pytest.raises(ValueError, match=name):
            ServiceSettings(**{name: 0})
    with pytest.raises(ValueError, match="max_connections"):
        ServiceSettings(max_connections=0)


def test_serve_flags_set_the_bounds() -> None:
    from chatlab.cli import _settings, build_parser

    flags = ["--store-timeout", "2", "--keep-alive-timeout", "3", "--header-timeout", "4", "--body-timeout", "6"]
    flags += ["--max-connections", "7", "--allowed-host", "a.example", "--allowed-host", "b.example"]
    settings = _settings(build_parser().parse_args(["serve", *flags]))
    assert (settings.store_timeout, settings.keep_alive_timeout, settings.header_timeout) == (2, 3, 4)
    assert (settings.body_timeout, settings.max_connections) == (6, 7)
    assert settings.allowed_hosts == ("a.example", "b.example")
