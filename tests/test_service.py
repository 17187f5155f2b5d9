"""The chat history service over real HTTP: every endpoint, status code and bad input."""

from __future__ import annotations

import json

import httpx
import pytest

from chatlab.service import ServiceSettings
from tests.summaries import article

KEY = "286d2f0b7b7a43688ad32556e3610f54"


def text(role: str, value: str) -> dict:
    return {"role": role, "contents": [{"$type": "text", "text": value}]}


def ordered(raw: str | bytes):
    """JSON with objects as key/value pair lists, so comparisons see key order too."""
    return json.loads(raw, object_pairs_hook=list)


def test_root_names_the_service(http: httpx.Client) -> None:
    response = http.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "service": "chat-history-service",
        "description": "Chat history is stored in memory and exposed over HTTP.",
    }


def test_unknown_conversation_reads_as_empty_list(http: httpx.Client) -> None:
    response = http.get(f"/chat-history/{KEY}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == []


def test_append_answers_202_with_location_and_keeps_order(http: httpx.Client) -> None:
    first = http.post(f"/chat-history/{KEY}", json={"messages": [text("user", "現在時刻を教えてください")]})
    assert first.status_code == 202
    assert first.headers["location"] == f"/chat-history/{KEY}"
    assert first.content == b""
    http.post(f"/chat-history/{KEY}", json={"messages": [text("assistant", "a"), text("user", "b")]})
    assert [m["contents"][0]["text"] for m in http.get(f"/chat-history/{KEY}").json()] == [
        "現在時刻を教えてください",
        "a",
        "b",
    ]


def test_empty_append_creates_nothing(http: httpx.Client) -> None:
    assert http.post(f"/chat-history/{KEY}", json={"messages": []}).status_code == 202
    assert http.get("/chat-history").json() == []


def test_summaries_are_ordered_by_key_with_exact_counts(http: httpx.Client) -> None:
    for key, count in (("b", 2), ("a-1", 1), ("C_3", 3)):
        http.post(f"/chat-history/{key}", json={"messages": [text("user", str(i)) for i in range(count)]})
    assert article(http.get("/chat-history").json()) == [
        {"conversationKey": "C_3", "messageCount": 3},
        {"conversationKey": "a-1", "messageCount": 1},
        {"conversationKey": "b", "messageCount": 2},
    ]


def test_put_replaces_and_delete_removes(http: httpx.Client) -> None:
    http.post(f"/chat-history/{KEY}", json={"messages": [text("user", "old")]})
    replaced = http.put(f"/chat-history/{KEY}", json={"messages": [text("user", "new1"), text("user", "new2")]})
    assert replaced.status_code == 204
    assert [m["contents"][0]["text"] for m in http.get(f"/chat-history/{KEY}").json()] == ["new1", "new2"]
    assert http.put("/chat-history/fresh", json={"messages": []}).status_code == 204
    assert {"conversationKey": "fresh", "messageCount": 0} in article(http.get("/chat-history").json())

    assert http.delete(f"/chat-history/{KEY}").status_code == 204
    assert http.get(f"/chat-history/{KEY}").json() == []
    assert [s["conversationKey"] for s in article(http.get("/chat-history").json())] == ["fresh"]
    assert http.delete("/chat-history/never-was").status_code == 204


# Every content type in shared/reference/meai-wire.md, with nulls, nested values and unknown keys.
ROUND_TRIP_MESSAGES = [
    {
        "authorName": "Fred",
        "createdAt": "2024-06-01T12:00:00+00:00",
        "role": "user",
        "contents": [{"$type": "text", "text": "Hello, world!", "annotations": None, "additionalProperties": None}],
        "messageId": "msg42",
        "additionalProperties": {"metaKey": "metaValue", "nested": {"list": [1, 2.5, None, True, {"z": 1, "a": 2}]}},
    },
    {
        "authorName": None,
        "createdAt": None,
        "role": "assistant",
        "contents": [
            {"$type": "reasoning", "text": "reasoning text", "protectedData": "protected"},
            {
                "$type": "functionCall",
                "callId": "call123",
                "name": "myFunction",
                "arguments": {"arg1": "value1", "arg2": 42, "deep": {"x": [None, {"y": "ü"}]}},
                "informationalOnly": True,
                "additionalProperties": {"key": "val"},
            },
        ],
        "messageId": None,
        "additionalProperties": None,
    },
    {
        "role": "tool",
        "contents": [
            {
                "$type": "functionResult",
                "result": {"value": [1, {"a": None}], "text": "the result"},
                "callId": "call123",
            },
            {"$type": "functionResult", "callId": "c2", "result": None},
        ],
    },
    {
        "role": "assistant",
        "contents": [
            {
                "$type": "data",
                "uri": "data:audio/wav;base64,AQIDBA==",
                "name": "audio.wav",
                "additionalProperties": {"source": "microphone"},
            },
            {"$type": "uri", "uri": "http://localhost/something", "mediaType": "image/png"},
            {"$type": "error", "message": "Error occurred", "errorCode": "ERR001", "details": "Something went wrong"},
            {
                "$type": "usage",
                "details": {
                    "inputTokenCount": 10,
                    "outputTokenCount": 20,
                    "totalTokenCount": 30,
                    "cachedInputTokenCount": 5,
                    "reasoningTokenCount": 8,
                    "additionalCounts": None,
                },
            },
        ],
        "unknownMessageKey": [1, "two"],
    },
]


@pytest.mark.parametrize("method", ["post", "put"])
def test_messages_come_back_exactly_as_sent(http: httpx.Client, method: str) -> None:
    body = json.dumps({"messages": ROUND_TRIP_MESSAGES}, ensure_ascii=False).encode()
    response = getattr(http, method)(f"/chat-history/{KEY}", content=body, headers={"content-type": "application/json"})
    assert response.is_success
    stored = http.get(f"/chat-history/{KEY}")
    assert ordered(stored.content) == ordered(json.dumps(ROUND_TRIP_MESSAGES))


BAD_BODIES = {
    "malformed JSON": (b'{"messages": [', "not valid JSON"),
    "NaN": (b'{"messages": [NaN]}', "NaN"),
    "not UTF-8": (b'{"messages": ["\xff"]}', "UTF-8"),
    "not an object": (b"[]", '"messages" list'),
    "no messages key": (b'{"Messages2": []}', '"messages" list'),
    "messages not a list": (b'{"messages": {"role": "user"}}', "must be a list"),
    "message not an object": (b'{"messages": ["hello"]}', "messages[0]"),
    "missing role": (b'{"messages": [{"contents": []}]}', "messages[0].role"),
    "empty role": (b'{"messages": [{"role": "", "contents": []}]}', "messages[0].role"),
    "role not a string": (b'{"messages": [{"role": 1, "contents": []}]}', "messages[0].role"),
    "missing contents": (b'{"messages": [{"role": "user"}]}', "messages[0].contents"),
    "missing $type": (b'{"messages": [{"role": "user", "contents": [{"text": "x"}]}]}', "$type"),
    "unknown $type": (b'{"messages": [{"role": "user", "contents": [{"$type": "textual"}]}]}', "textual"),
    "$type not first": (b'{"messages": [{"role": "user", "contents": [{"text": "x", "$type": "text"}]}]}', "first key"),
    "function call without callId": (
        b'{"messages": [{"role": "assistant", "contents": [{"$type": "functionCall", "name": "f"}]}]}',
        "messages[0].contents[0].callId",
    ),
    "arguments not an object": (
        b'{"messages": [{"role": "a", "contents": '
        b'[{"$type": "functionCall", "callId": "c", "name": "f", "arguments": "x"}]}]}',
        "arguments",
    ),
    "bad createdAt": (b'{"messages": [{"role": "user", "contents": [], "createdAt": "yesterday"}]}', "ISO 8601"),
    "one bad message among good ones": (
        b'{"messages": [{"role": "user", "contents": []}, {"role": "user", "contents": [{"$type": "nope"}]}]}',
        "messages[1].contents[0]",
    ),
}


@pytest.mark.parametrize("method", ["post", "put"])
@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_bad_bodies_get_400_with_a_clear_problem_and_change_nothing(http: httpx.Client, method: str, case: str) -> None:
    before = [text("user", "kept")]
    http.post(f"/chat-history/{KEY}", json={"messages": before})
    body, hint = BAD_BODIES[case]
    response = getattr(http, method)(f"/chat-history/{KEY}", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400 and problem["title"] == "Bad Request"
    assert hint in problem["detail"]
    assert http.get(f"/chat-history/{KEY}").json() == before


@pytest.mark.parametrize("key", ["a.b", "with space", "x" * 129, "ключ", "a%2Fb"])
@pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
def test_unsafe_conversation_keys_are_refused(http: httpx.Client, key: str, method: str) -> None:
    kwargs = {"json": {"messages": [text("user", "x")]}} if method in ("post", "put") else {}
    response = http.request(method.upper(), f"/chat-history/{key}", **kwargs)
    assert response.status_code in (400, 404), response.text
    assert "detail" in response.json()
    assert http.get("/chat-history").json() == []


def test_longest_allowed_key_is_accepted(http: httpx.Client) -> None:
    key = "k" * 128
    assert http.post(f"/chat-history/{key}", json={"messages": [text("user", "x")]}).status_code == 202
    assert article(http.get("/chat-history").json()) == [{"conversationKey": key, "messageCount": 1}]


class TestLimits:
    @pytest.fixture
    def settings(self) -> ServiceSettings:
        return ServiceSettings(max_body_bytes=2000, max_messages=3)

    def test_body_over_the_limit_gets_413(self, http: httpx.Client) -> None:
        big = {"messages": [text("user", "x" * 3000)]}
        response = http.post(f"/chat-history/{KEY}", json=big)
        assert response.status_code == 413
        assert "2000 bytes" in response.json()["detail"]
        assert http.get("/chat-history").json() == []

    def test_streamed_body_without_length_is_cut_at_the_limit(self, http: httpx.Client) -> None:
        def chunks():
            yield b'{"messages": ['
            for _ in range(100):
                yield json.dumps(text("user", "y" * 50)).encode() + b","
            yield b"]}"

        response = http.post(f"/chat-history/{KEY}", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert http.get("/chat-history").json() == []

    def test_too_many_messages_get_413(self, http: httpx.Client) -> None:
        response = http.put(f"/chat-history/{KEY}", json={"messages": [text("user", "m")] * 4})
        assert response.status_code == 413
        assert "limit is 3" in response.json()["detail"]
        assert http.post(f"/chat-history/{KEY}", json={"messages": [text("user", "m")] * 3}).status_code == 202


def test_unknown_route_and_method_answer_problem_json(http: httpx.Client) -> None:
    missing = http.get("/history")
    assert missing.status_code == 404 and "/openapi.json" in missing.json()["detail"]
    wrong = http.request("TRACE", f"/chat-history/{KEY}")
    assert wrong.status_code == 405 and wrong.headers["allow"]


def test_openapi_documents_real_schemas_and_examples(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    paths = spec["paths"]
    assert set(paths) == {
        "/",
        "/chat-history",
        "/chat-history/{conversationKey}",
        "/chat-history/{conversationKey}/fork",
        "/chat-history/{conversationKey}/participants",
    }
    assert set(paths["/chat-history/{conversationKey}"]) == {"get", "head", "post", "put", "patch", "delete"}
    get = paths["/chat-history/{conversationKey}"]["get"]
    assert {p["name"] for p in get["parameters"] if p["in"] == "query"} == {"after", "limit", "view", "author"}
    assert {"ETag", "X-Message-Count", "Link"} <= set(get["responses"]["200"]["headers"])
    head = paths["/chat-history/{conversationKey}"]["head"]
    assert {"ETag", "X-Message-Count"} <= set(head["responses"]["200"]["headers"])
    post = paths["/chat-history/{conversationKey}"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AppendChatMessagesRequest"
    }
    assert "202" in post["responses"]
    assert "Idempotency-Key" in post["responses"]["422"]["description"]  # not FastAPI's validation error
    assert "422" not in paths["/chat-history/{conversationKey}"]["put"]["responses"]
    for method in ("put", "post", "delete"):  # each takes If-Match and documents its 412 with the current ETag
        operation = paths["/chat-history/{conversationKey}"][method]
        assert "If-Match" in {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert "ETag" in operation["responses"]["412"]["headers"]
    assert "application/problem+json" in post["responses"]["400"]["content"]
    schemas = spec["components"]["schemas"]
    assert schemas["AppendChatMessagesRequest"]["examples"][0]["messages"][0]["role"] == "user"
    content_union = schemas["ChatMessage"]["properties"]["contents"]["items"]
    assert content_union["discriminator"]["propertyName"] == "$type"
    assert {"text", "functionCall", "functionResult", "reasoning", "data", "uri", "error", "usage"} <= set(
        content_union["discriminator"]["mapping"]
    )
    assert "ValidationError" not in schemas


def test_a_router_of_the_callers_own_is_served_beside_the_service() -> None:
    """A route of the caller's own (here from an APIRouter, by include_router) is served beside the service's."""
    from fastapi import APIRouter

    from chatlab.runner import BackgroundServer
    from chatlab.service import create_app
    from chatlab.stores import InMemoryChatHistoryStore

    extended = create_app(InMemoryChatHistoryStore())
    router = APIRouter()

    @router.get("/extra/{name}")
    async def extra(name: str) -> dict[str, str]:
        return {"hello": name}

    extended.include_router(router)
    with BackgroundServer(extended, name="extended") as two:
        assert httpx.get(f"{two.url}/extra/you").json() == {"hello": "you"}
        assert httpx.post(f"{two.url}/chat-history/k", json={"messages": []}).status_code == 202
        assert httpx.get(f"{two.url}/chat-history/k").json() == []


def test_a_conversations_endpoints_are_called_with_the_request_alone() -> None:
    """The route class (chatlab/service/request_route.py) hands the request straight to the endpoints that take
    only it (every endpoint of the API); an endpoint with dependencies or parameters keeps FastAPI's handler."""
    from fastapi.routing import APIRoute

    from chatlab.service import create_app
    from chatlab.service.request_route import RequestRoute, takes_only_the_request

    routes = [r for r in create_app("memory://").routes if isinstance(r, APIRoute)]
    api = [r for r in routes if r.path.startswith("/chat-history") and r.path != "/chat-history/"]
    assert len(api) == 9 and all(isinstance(r, RequestRoute) for r in routes)
    assert all(takes_only_the_request(r.endpoint) and r.get_route_handler() == r.endpoint for r in api)
    info = next(r for r in routes if r.path == "/")  # the caller is a dependency there: FastAPI solves it
    assert takes_only_the_request(info.endpoint) and info.get_route_handler() != info.endpoint
    empty = next(r for r in routes if r.path == "/chat-history/")
    assert not takes_only_the_request(empty.endpoint) and empty.get_route_handler() != empty.endpoint
