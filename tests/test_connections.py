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


def test_open_connections_over_the_cap_get_503_and_idle_holders_are_cut_off() -> None:
    """A client holding every allowed connection gets the others a 503, not a hang; and only until its idle
    sockets time out: afterwards the service answers again."""
    server = start_service(settings=ServiceSettings(max_connections=8, header_timeout=1.0))
    held: list[socket.socket] = []
    close = {"Connection": "close"}
    try:
        held += [connect(server) for _ in range(7)]
        assert httpx.get(f"{server.url}/chat-history", headers=close, timeout=30).status_code == 200  # the 8th
        held.append(connect(server))
        over = httpx.get(f"{server.url}/chat-history", headers=close, timeout=30)  # a 9th
        assert over.status_code == 503
        for sock in held:  # each idle holder is closed by the server
            assert read_until_closed(sock) == b""
        assert httpx.get(f"{server.url}/chat-history", timeout=30).status_code == 200
    finally:
        for sock in held:
            sock.close()
        server.stop()


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
