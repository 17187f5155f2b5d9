"""The conversation shortcut (chatlab.service.shortcut) answers exactly as the app's layers and router do.

Each request is made twice over real HTTP to the same service, on the same conversation state: once with the
shortcut (the default) and once with it turned off (every request through FastAPI's layers and router); the
answers must be byte for byte the same but for the random part of the versions.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.service.shortcut import ConversationShortcut
from chatlab.stores import InMemoryChatHistoryStore

MESSAGES = b'{"messages":[{"role":"user","contents":[{"$type":"text","text":"Hi"}]}]}'
JSON = {"Content-Type": "application/json"}
SECRET = "s3cret-key-of-the-team-0123456789abcdef"
# (method, path, headers, body): good requests and every kind of refusal the conversation routes make
CASES: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("GET", "/chat-history/k", {}, None),
    ("GET", "/chat-history/absent", {}, None),
    ("GET", "/chat-history/k?after=1&limit=1", {}, None),
    ("GET", "/chat-history/k?afer=1", {}, None),
    ("HEAD", "/chat-history/k", {}, None),
    ("POST", "/chat-history/k", {**JSON, "Idempotency-Key": '"{run}-one"'}, MESSAGES),
    ("POST", "/chat-history/k", {**JSON, "Idempotency-Key": '"{run}-replayed"'}, MESSAGES),
    ("POST", "/chat-history/k", {**JSON, "Idempotency-Key": '"{run}-reused"'}, MESSAGES.replace(b"Hi", b"Ho")),
    ("POST", "/chat-history/k", {**JSON, "Idempotency-Key": "unquoted"}, MESSAGES),
    ("POST", "/chat-history/k", {**JSON, "If-Match": '"0"'}, MESSAGES),
    ("POST", "/chat-history/k", {"Content-Type": "text/plain"}, MESSAGES),
    ("POST", "/chat-history/k", JSON, b'{"messages": 3}'),
    ("POST", "/chat-history/k", JSON, b"{not json"),
    ("POST", "/chat-history/bad.key", JSON, MESSAGES),
    ("PUT", "/chat-history/k", JSON, MESSAGES),
    ("DELETE", "/chat-history/k", {"If-Match": "*"}, None),
    ("DELETE", "/chat-history/absent", {"If-Match": "*"}, None),
    ("PATCH", "/chat-history/k", JSON, MESSAGES),
    ("GET", "/chat-history/k/more", {}, None),
    ("GET", "/chat-history/", {}, None),
    ("GET", "/chat-history/k", {"Host": "elsewhere.example"}, None),
    ("GET", "/chat-history/k", {"X-Large": "x" * 9000}, None),
    ("GET", "/chat-history/k", {"Authorization": "Bearer not-a-key"}, None),
]


@pytest.fixture(params=["open", "keys"])
def settings(request: pytest.FixtureRequest) -> ServiceSettings:
    if request.param == "open":
        return ServiceSettings()
    return ServiceSettings(api_keys={SECRET: "team"}, rate_limit="1000/s")


@pytest.fixture
def server(settings: ServiceSettings) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(InMemoryChatHistoryStore(), settings), name="shortcut-test") as server:
        yield server


def _app(server: BackgroundServer) -> Any:
    return server.app


def _answer(client: httpx.Client, case: tuple[str, str, dict[str, str], bytes | None], run: str) -> tuple[Any, ...]:
    """The answer to ``case`` on the same state each time: 3 messages, two idempotency keys of this ``run`` used."""
    method, path, headers, body = case
    client.delete("/chat-history/k")
    client.put("/chat-history/k", content=MESSAGES, headers=JSON).raise_for_status()
    for key in ("replayed", "reused"):
        client.post("/chat-history/k", content=MESSAGES, headers={**JSON, "Idempotency-Key": f'"{run}-{key}"'})
    headers = {name: value.replace("{run}", run) for name, value in headers.items()}
    answer = client.request(method, path, headers=headers, content=body)
    kept = sorted((k, _normal(v)) for k, v in answer.headers.items() if k not in ("date", "server"))
    return answer.status_code, kept, _normal(answer.text)


def _normal(text: str) -> str:
    return re.sub(r'"[0-9a-f]{16}\.', '"G.', text)  # a version's generation is random


def test_every_answer_is_the_one_of_the_full_path(server: BackgroundServer, settings: ServiceSettings) -> None:
    app = _app(server)
    assert isinstance(app.shortcut, ConversationShortcut)
    auth = {"Authorization": f"Bearer {SECRET}"} if settings.api_keys else {}
    with httpx.Client(base_url=server.url, headers=auth) as client:
        shortcut = app.shortcut
        quick = [_answer(client, case, f"quick{i}") for i, case in enumerate(CASES)]
        app.shortcut = None
        full = [_answer(client, case, f"full{i}") for i, case in enumerate(CASES)]
        app.shortcut = shortcut
    for case, a, b in zip(CASES, quick, full, strict=True):
        assert a == b, case[:2]
    statuses = [answer[0] for answer in quick]
    assert set(statuses) >= {200, 202, 204, 400, 404, 405, 412, 415, 421, 422, 431}, statuses


def test_no_host_is_refused_as_on_the_full_path(server: BackgroundServer) -> None:
    app = _app(server)

    def ask() -> bytes:
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(b"GET /chat-history/k HTTP/1.0\r\n\r\n")
            return b"".join(iter(lambda: sock.recv(65536), b"")).split(b"\r\n\r\n", 1)[1]

    quick = ask()
    app.shortcut, shortcut = None, app.shortcut
    assert ask() == quick
    app.shortcut = shortcut
    assert b'"status":400' in quick


@pytest.mark.anyio
async def test_conversation_requests_skip_the_layers() -> None:
    """With the layers made unusable, a conversation's requests are still answered; another path is not."""
    app: Any = create_app(InMemoryChatHistoryStore())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        assert (await client.get("/")).status_code == 200  # builds the layers, and the shortcut with them

        async def broken(scope: Any, receive: Any, send: Any) -> None:
            raise AssertionError("the layers were used")

        app.middleware_stack = broken
        assert (await client.put("/chat-history/k", content=MESSAGES, headers=JSON)).status_code == 204
        assert (await client.post("/chat-history/k", content=MESSAGES, headers=JSON)).status_code == 202
        assert (await client.get("/chat-history/k")).headers["x-message-count"] == "2"
        assert (await client.post("/chat-history/k", content=b"[", headers=JSON)).status_code == 400
        with pytest.raises(AssertionError, match="layers were used"):
            await client.get("/chat-history")


def test_a_middleware_it_does_not_know_turns_it_off() -> None:
    cors: Any = create_app(InMemoryChatHistoryStore(), ServiceSettings(cors_origins=("http://page.example",)))
    with BackgroundServer(cors, name="cors") as server:
        assert cors.shortcut is None
        assert httpx.get(f"{server.url}/chat-history/k").headers["vary"] == "Origin"  # what CORS adds to every answer

    metered: Any = create_app(InMemoryChatHistoryStore(), ServiceSettings(metrics=True))
    with BackgroundServer(metered, name="metered") as server:
        assert metered.shortcut is None
        with httpx.Client(base_url=server.url) as client:
            client.get("/chat-history/k")
            assert 'route="/chat-history/{conversationKey}"' in client.get("/metrics").text

    own: Any = create_app(InMemoryChatHistoryStore())
    seen: list[str] = []

    @own.middleware("http")
    async def note(request: Request, call_next: Any) -> Response:
        seen.append(request.url.path)
        response: Response = await call_next(request)
        return response

    with BackgroundServer(own, name="own-middleware") as server:
        httpx.get(f"{server.url}/chat-history/k")
    assert own.shortcut is None and seen == ["/chat-history/k"]


def test_a_handler_that_is_not_async_turns_it_off() -> None:
    app: FastAPI = create_app(InMemoryChatHistoryStore())

    def plain(request: Request, exc: KeyError) -> Response:
        return Response(status_code=500)

    app.add_exception_handler(KeyError, plain)
    with BackgroundServer(app, name="sync-handler") as server:
        httpx.get(f"{server.url}/chat-history/k").raise_for_status()
    assert getattr(app, "shortcut", "missing") is None
