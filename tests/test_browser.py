"""What a web page could make a browser send to a local service is refused: a foreign Host, a non-JSON write.

Over real HTTP (raw sockets where httpx would not send it), against the service start_service runs.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service

MESSAGE = {"role": "user", "contents": [{"$type": "text", "text": "hi"}]}
BODY = b'{"messages": [{"role": "user", "contents": [{"$type": "text", "text": "hi"}]}]}'


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    server = start_service()
    yield server
    server.stop()


@pytest.fixture
def http(server: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def assert_problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status
    return problem


def raw_request(server: BackgroundServer, request: bytes) -> bytes:
    """Send one request as given and read the answer until the server closes (Connection: close)."""
    with socket.create_connection(("127.0.0.1", server.port or 0), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


# -- Host ---------------------------------------------------------------------------------------


def test_a_rebound_name_is_refused_and_reads_and_deletes_nothing(server: BackgroundServer, http: httpx.Client) -> None:
    assert http.post("/chat-history/secret", json={"messages": [MESSAGE]}).status_code == 202
    evil = {"Host": f"evil.example:{server.port}"}
    for method in ("GET", "DELETE"):
        problem = assert_problem(http.request(method, "/chat-history/secret", headers=evil), 421)
        assert "--allowed-host" in str(problem["detail"])
    assert_problem(http.get("/chat-history", headers=evil), 421)
    assert_problem(http.options("/chat-history", headers={**evil, "Origin": "http://evil.example"}), 421)
    assert http.get("/chat-history/secret").json() == [MESSAGE]  # still there


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST.", "localhost:{port}", "[::1]:{port}"])
def test_loopback_names_are_served_with_or_without_the_port(server: BackgroundServer, host: str) -> None:
    response = httpx.get(f"{server.url}/chat-history", headers={"Host": host.format(port=server.port)})
    assert response.status_code == 200, response.text


def test_a_request_without_host_or_with_a_malformed_one_is_a_bad_request(server: BackgroundServer) -> None:
    answer = raw_request(server, b"GET /chat-history HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ") and b"no Host header" in answer
    for bad in ("localhost:port", "[::1", "[::1]x"):
        assert_problem(httpx.get(f"{server.url}/", headers={"Host": bad}), 421)


def test_allowed_hosts_add_names_and_star_allows_any() -> None:
    named = start_service(settings=ServiceSettings(allowed_hosts=("chat.internal",)))
    anyone = start_service(settings=ServiceSettings(allowed_hosts=("*",)))
    try:
        assert httpx.get(f"{named.url}/", headers={"Host": f"chat.internal:{named.port}"}).status_code == 200
        assert httpx.get(f"{named.url}/", headers={"Host": "other.internal"}).status_code == 421
        assert httpx.get(f"{anyone.url}/", headers={"Host": "whatever.example"}).status_code == 200
    finally:
        named.stop()
        anyone.stop()


def test_the_service_allows_the_host_it_is_started_on() -> None:
    server = start_service(host="localhost")
    try:
        assert server.url.startswith("http://localhost:")
        assert httpx.get(f"{server.url}/chat-history").status_code == 200  # Host: localhost:PORT
    finally:
        server.stop()


def test_the_address_a_request_came_in_on_is_served() -> None:
    """A request for the address it reached is answered (a rebound name still is not): what a service bound
    to all addresses needs. Shown on 127.0.0.2, a loopback address that is not among the default names."""
    from chatlab.service import create_app

    with BackgroundServer(create_app(), name="other-address", host="127.0.0.2") as server:
        url = f"http://127.0.0.2:{server.port}"
        assert httpx.get(f"{url}/", headers={"Host": f"127.0.0.2:{server.port}"}).status_code == 200
        assert httpx.get(f"{url}/", headers={"Host": "127.0.0.3"}).status_code == 421
        assert httpx.get(f"{url}/", headers={"Host": "evil.example"}).status_code == 421


# -- writes are JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "json",
    ],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_write_that_is_not_json_is_415_and_writes_nothing(
    http: httpx.Client, method: str, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = http.request(method, "/chat-history/k", content=BODY, headers=headers)
    problem = assert_problem(response, 415)
    assert "application/json" in str(problem["detail"])
    assert http.get("/chat-history/k").json() == []


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.x+json"],
)
def test_json_writes_are_accepted(http: httpx.Client, content_type: str) -> None:
    assert http.post("/chat-history/k", content=BODY, headers={"Content-Type": content_type}).status_code == 202
    assert http.put("/chat-history/k", content=BODY, headers={"Content-Type": content_type}).status_code == 204


# -- no redirect to the request's Host ----------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
def test_an_empty_key_is_400_not_a_redirect(http: httpx.Client, method: str) -> None:
    body = {"messages": [MESSAGE]} if method in ("POST", "PUT") else None
    response = http.request(method, "/chat-history/", json=body, headers={"Host": "localhost"})
    problem = assert_problem(response, 400)
    assert "key is empty" in str(problem["detail"])
    assert "location" not in response.headers
    assert http.get("/chat-history").json() == []
