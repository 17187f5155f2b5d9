"""One home per rule, over real HTTP with each store behind the service: a write's conditions (``If-Match``,
``Idempotency-Key``) on forks and ``PATCH``, the one key rule under other key settings, ``HEAD`` reading ``GET``'s
query, strict parameters, and the one metadata rule (docs/protections.md, docs/conversations.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chatlab.client import ChatHistoryClient
from chatlab.client.retry import RetryPolicy
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, start_service
from tests.faults import DroppingProxy

FORK_TAGS = {"chatlab.forkOf", "chatlab.forkThrough"}


def text(value: str) -> dict[str, Any]:
    return {"role": "user", "contents": [{"$type": "text", "text": value}]}


def append(http: httpx.Client, key: str, *values: str) -> httpx.Response:
    response = http.post(f"/chat-history/{key}", json={"messages": [text(v) for v in values]})
    assert response.status_code == 202, response.text
    return response


def keys(http: httpx.Client) -> list[str]:
    return [s["conversationKey"] for s in http.get("/chat-history").json()]


def new_key(response: httpx.Response) -> str:
    return response.headers["location"].rsplit("/", 1)[1]


def fork(http: httpx.Client, source: str, idempotency_key: str | None = None, **query: Any) -> httpx.Response:
    headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
    return http.post(f"/chat-history/{source}/fork", params=query, headers=headers)


def test_a_retried_fork_gets_its_first_answer_whatever_happened_since(http: httpx.Client) -> None:
    append(http, "src", "a", "b", "c")
    first = fork(http, "src", "fork-1", through=2)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    forked = new_key(first)

    append(http, "src", "d")  # the source grew
    grown = fork(http, "src", "fork-1", through=2)
    assert grown.status_code == 201 and grown.headers["idempotent-replayed"] == "true"
    assert (grown.headers["location"], grown.headers["etag"]) == (first.headers["location"], first.headers["etag"])

    # the fork's tags edited up to the most a conversation carries, its own two removed
    full = {f"t{n}": "x" for n in range(32)}
    assert http.patch(f"/chat-history/{forked}", json={"tags": dict.fromkeys(FORK_TAGS)}).status_code == 200
    edited = http.patch(f"/chat-history/{forked}", json={"tags": full})
    assert edited.status_code == 200, edited.text
    again = fork(http, "src", "fork-1", through=2)
    assert again.status_code == 201 and again.headers["location"] == first.headers["location"]
    [summary] = [s for s in http.get("/chat-history").json() if s["conversationKey"] == forked]
    assert summary["tags"] == full and summary["messageCount"] == 2  # the replay wrote nothing

    assert http.delete("/chat-history/src").status_code == 204  # the source deleted
    gone = fork(http, "src", "fork-1", through=2)
    assert gone.status_code == 201 and gone.headers["location"] == first.headers["location"]
    assert sorted(keys(http)) == [forked]

    other = fork(http, "src", "fork-1", through=1)  # the same key for another request
    assert other.status_code == 422 and "fork" in other.json()["detail"]


def test_fork_and_patch_honour_if_match(http: httpx.Client) -> None:
    etag = append(http, "src", "a", "b").headers["etag"]
    append(http, "src", "c")
    stale = http.post("/chat-history/src/fork", headers={"If-Match": etag})
    assert stale.status_code == 412 and stale.headers["etag"] != etag
    assert keys(http) == ["src"]  # nothing made
    current = http.get("/chat-history/src").headers["etag"]
    made = http.post("/chat-history/src/fork", headers={"If-Match": current})
    assert made.status_code == 201

    refused = http.patch("/chat-history/src", json={"title": "x"}, headers={"If-Match": etag})
    assert refused.status_code == 412 and refused.headers["etag"] == current
    assert "title" not in http.get("/chat-history").json()[0]
    done = http.patch("/chat-history/src", json={"title": "x"}, headers={"If-Match": current})
    assert done.status_code == 200 and done.json()["title"] == "x"
    assert http.patch("/chat-history/src", json={"title": "y"}, headers={"If-Match": "*"}).status_code == 200
    missing = http.patch("/chat-history/none", json={"title": "y"}, headers={"If-Match": "*"})
    assert missing.status_code == 412 and missing.headers["etag"] == '"0"'
    assert http.patch("/chat-history/none", json={"title": "y"}, headers={"If-Match": '"0"'}).status_code == 404
    assert sorted(keys(http)) == sorted(["src", new_key(made)])  # nothing made by a refused PATCH


def test_a_taken_fork_key_is_a_conflict_that_names_no_unsent_header(http: httpx.Client) -> None:
    append(http, "src", "a")
    append(http, "taken", "b")
    named = fork(http, "src", key="mine")
    assert named.status_code == 201 and new_key(named) == "mine"
    taken = fork(http, "src", key="taken")
    assert taken.status_code == 409 and "If-Match" not in taken.json()["detail"]
    assert "?key=" in taken.json()["detail"]
    assert http.get("/chat-history/taken").json() == [text("b")]
    assert fork(http, "src", key="bad key").status_code == 400


def test_head_answers_as_get_would_without_the_body(http: httpx.Client) -> None:
    append(http, "k", "a", "b", "c")
    for query in ("view=bogus", "afer=1", "limit=0", "limit=1&limit=2", "after=-1"):
        get = http.get(f"/chat-history/k?{query}")
        head = http.head(f"/chat-history/k?{query}")
        assert get.status_code == head.status_code == 400, query
    for query in ("", "limit=1", "after=1&limit=1", "view=summary&limit=2"):
        get = http.get(f"/chat-history/k?{query}")
        head = http.head(f"/chat-history/k?{query}")
        assert head.status_code == get.status_code == 200 and head.content == b""
        for name in ("etag", "x-message-count", "link"):
            assert head.headers.get(name) == get.headers.get(name), (query, name)


@pytest.mark.parametrize(
    "target",
    [
        "/chat-history/k?limit=1&limit=2",
        "/chat-history/k?view=x&view=summary",
        "/chat-history?limit=1&limit=2",
        "/chat-history?after=a&after=b",
        "/chat-history?limit=1.0",
        "/chat-history?limit=%2B1",
        "/chat-history?limit=+1",
        "/chat-history?limit=%201",
        "/chat-history/k?after=1.0",
    ],
)
def test_repeated_and_loose_parameters_are_400_naming_them(http: httpx.Client, target: str) -> None:
    append(http, "k", "a")
    response = http.get(target)
    assert response.status_code == 400, response.text
    name = target.rpartition("?")[2].partition("=")[0]
    assert name in response.json()["detail"]


def test_write_parameters_are_strict_too(http: httpx.Client) -> None:
    append(http, "k", "a", "b")
    repeated = http.post("/chat-history/k/fork?through=2&through=1")
    assert repeated.status_code == 400 and "through" in repeated.json()["detail"]
    unknown = http.post("/chat-history/k?afer=1", json={"messages": [text("c")]})
    assert unknown.status_code == 400 and "afer" in unknown.json()["detail"]
    assert keys(http) == ["k"] and len(http.get("/chat-history/k").json()) == 2


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"title": "a", "title": "b"}', "repeats"),
        (b'{"title": "title\\n"}', "control"),
        ('{"title": "a\u0085b"}'.encode(), "control"),
        (b'{"tags": {"name\\n": "x"}}', "tag name"),
        ('{"tags": {"n": "a\u0085b"}}'.encode(), "control"),
        (b'{"tags": {"n": 5}}', "string"),
        (b'{"tags": []}', "object"),
    ],
)
def test_patch_uses_the_one_metadata_rule(http: httpx.Client, body: bytes, says: str) -> None:
    append(http, "c", "a")
    response = http.patch("/chat-history/c", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and says in response.json()["detail"], response.text
    assert "title" not in http.get("/chat-history").json()[0]


def test_a_lost_fork_answer_is_retried_into_one_fork(service: BackgroundServer, http: httpx.Client) -> None:
    append(http, "src", "a", "b")
    proxy = DroppingProxy(service.port)
    try:
        with ChatHistoryClient(proxy.url, retry=RetryPolicy(backoff=0.01)) as client:
            forked = client.fork("src", 1)
        assert proxy.dropped == 1
    finally:
        proxy.close()
    assert sorted(keys(http)) == sorted(["src", forked])


@pytest.fixture
def word_keys(store_url: str) -> Iterator[BackgroundServer]:
    """The service with docs/protections.md's example pattern, ``^\\w+$`` (Unicode word characters)."""
    server = start_service(store=store_url, settings=ServiceSettings(key_pattern=r"^\w+$"))
    try:
        yield server
    finally:
        server.stop()


def test_what_the_service_lists_its_own_link_pages_past(word_keys: BackgroundServer) -> None:
    with httpx.Client(base_url=word_keys.url, timeout=30) as http:
        for key in ("a1", "a²", "b", "c"):
            append(http, key, "x")
        seen: list[str] = []
        url: str | None = "/chat-history?limit=1"
        while url is not None:
            response = http.get(url)
            assert response.status_code == 200, response.text
            seen += [s["conversationKey"] for s in response.json()]
            url = response.links.get("next", {}).get("url")
        assert seen == sorted(["a1", "a²", "b", "c"])


@pytest.mark.parametrize("settings", [{"key_max_length": 16}, {"key_pattern": r"^conv-[a-z0-9]+$"}])
def test_forks_work_under_every_key_setting(store_url: str, settings: dict[str, Any]) -> None:
    server = start_service(store=store_url, settings=ServiceSettings(**settings))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            append(http, "conv-src", "a")
            made = fork(http, "conv-src")
            assert made.status_code == 400 and "?key=" in made.json()["detail"]
            assert "conv-src" not in made.json()["detail"]  # the source key is not to blame
            named = fork(http, "conv-src", key="conv-copy")
            assert named.status_code == 201 and new_key(named) == "conv-copy"
            assert fork(http, "conv-src", key="copy").status_code == (400 if "key_pattern" in settings else 201)
    finally:
        server.stop()


def test_the_provider_forks_once_through_a_lost_answer(service: BackgroundServer, http: httpx.Client) -> None:
    from agent_framework import AgentSession

    from chatlab.client.provider import RemoteChatHistoryProvider

    append(http, "src", "a", "b")
    proxy = DroppingProxy(service.port)

    async def run() -> None:
        async with RemoteChatHistoryProvider(proxy.url, retry=RetryPolicy(backoff=0.01)) as provider:
            session = AgentSession()
            provider.attach_to_session(session, "src")
            await provider.fork_session(session)

    try:
        asyncio.run(run())
        assert proxy.dropped == 1
    finally:
        proxy.close()
    assert len(keys(http)) == 2


def test_a_fork_whose_origin_cannot_be_tagged_writes_nothing(store_url: str) -> None:
    """A source key longer than a tag value may be (with ``key_max_length`` above 200) is refused before the copy."""
    server = start_service(store=store_url, settings=ServiceSettings(key_max_length=300))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            source = "s" * 250
            append(http, source, "a")
            refused = fork(http, source, key="copy")
            assert refused.status_code == 400 and "200" in refused.json()["detail"], refused.text
            assert keys(http) == [source]
    finally:
        server.stop()
