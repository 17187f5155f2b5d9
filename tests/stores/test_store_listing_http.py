"""Paged listing, titles and tags over real HTTP, with each store behind the service (docs/conversations.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from chatlab.client import AsyncChatHistoryClient, ChatHistoryClient

KEYS = ["b", "B", "a-1", "a_1", "a", "Z9", "z", "k_7", "c0", "c1", "x"]


def text(value: str) -> dict[str, Any]:
    return {"role": "user", "contents": [{"$type": "text", "text": value}]}


def append(http: httpx.Client, key: str, count: int = 1) -> None:
    response = http.post(f"/chat-history/{key}", json={"messages": [text(f"{key}-{i}") for i in range(count)]})
    assert response.status_code == 202, response.text


def follow(http: httpx.Client, url: str) -> tuple[list[str], int]:
    """Every key of a listing, following ``Link: rel=next`` from ``url``; and how many pages it took."""
    keys: list[str] = []
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        response = http.get(next_url)
        assert response.status_code == 200, response.text
        keys += [s["conversationKey"] for s in response.json()]
        pages += 1
        next_url = response.links.get("next", {}).get("url")
    return keys, pages


def test_paging_through_link_yields_every_conversation_once_in_key_order(http: httpx.Client) -> None:
    for n, key in enumerate(KEYS):
        append(http, key, n % 3 + 1)
    plain = http.get("/chat-history")
    assert "link" not in plain.headers
    assert [s["conversationKey"] for s in plain.json()] == sorted(KEYS)  # the article's array, unchanged
    assert all(set(s) == {"conversationKey", "messageCount", "createdAt", "updatedAt"} for s in plain.json())

    keys, pages = follow(http, "/chat-history?limit=2")
    assert keys == sorted(KEYS) and pages == (len(KEYS) + 1) // 2
    first = http.get("/chat-history?limit=2")
    assert len(first.json()) == 2
    assert first.headers["link"] == f'</chat-history?limit=2&after={sorted(KEYS)[1]}>; rel="next"'
    whole, pages = follow(http, f"/chat-history?limit={len(KEYS)}")
    assert whole == sorted(KEYS) and pages == 1  # a page that reaches the end names no next one
    counts = {s["conversationKey"]: s["messageCount"] for s in http.get("/chat-history?after=c1&limit=3").json()}
    assert counts == {key: n % 3 + 1 for n, key in enumerate(KEYS) if key in ("k_7", "x", "z")}


def test_titles_and_tags_are_set_by_patch_and_shown_in_summaries(http: httpx.Client) -> None:
    append(http, "trip", 2)
    etag = http.get("/chat-history/trip").headers["etag"]
    response = http.patch("/chat-history/trip", json={"title": "京都旅行", "tags": {"user": "u1", "lang": "ja"}})
    assert response.status_code == 200, response.text
    assert response.json()["title"] == "京都旅行" and response.json()["tags"] == {"user": "u1", "lang": "ja"}
    assert response.json()["messageCount"] == 2

    response = http.patch("/chat-history/trip", json={"tags": {"lang": None, "topic": "travel"}})
    assert response.json()["tags"] == {"user": "u1", "topic": "travel"} and response.json()["title"] == "京都旅行"
    [summary] = http.get("/chat-history").json()
    assert (summary["title"], summary["tags"]) == ("京都旅行", {"user": "u1", "topic": "travel"})
    assert http.get("/chat-history/trip").headers["etag"] == etag  # metadata is not part of the version

    assert "title" not in http.patch("/chat-history/trip", json={"title": None}).json()
    assert http.patch("/chat-history/nobody", json={"title": "x"}).status_code == 404
    assert http.get("/chat-history/nobody").json() == []  # nothing was created


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b'{"titel": "x"}', 400, "titel"),
        (b'{"tags": {"bad:name": "x"}}', 400, "tags"),
        (b'{"title": 5}', 400, "title"),
        (b"[]", 400, "object"),
        (b"{", 400, "JSON"),
    ],
)
def test_a_bad_patch_is_refused_and_writes_nothing(http: httpx.Client, body: bytes, status: int, says: str) -> None:
    append(http, "c")
    http.patch("/chat-history/c", json={"title": "kept"})
    response = http.patch("/chat-history/c", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status and says in response.json()["detail"], response.text
    assert http.get("/chat-history").json()[0]["title"] == "kept"


def test_too_many_tags_is_422_and_a_patch_needs_json(http: httpx.Client) -> None:
    append(http, "c")
    assert http.patch("/chat-history/c", json={"tags": {f"t{n}": "x" for n in range(32)}}).status_code == 200
    response = http.patch("/chat-history/c", json={"tags": {"one-more": "x"}})
    assert response.status_code == 422 and "at most 32 tags" in response.json()["detail"]
    form = http.patch(
        "/chat-history/c", content=b"title=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert form.status_code == 415


def test_tag_filters_page_and_keep_their_query_in_link(http: httpx.Client) -> None:
    for n in range(7):
        append(http, f"k{n}")
        http.patch(f"/chat-history/k{n}", json={"tags": {"parity": "even" if n % 2 == 0 else "odd", "all": "yes"}})
    keys, pages = follow(http, "/chat-history?limit=2&tag=parity:even")
    assert keys == ["k0", "k2", "k4", "k6"] and pages == 2
    assert "tag=parity%3Aeven" in http.get("/chat-history?limit=2&tag=parity:even").headers["link"]
    both = http.get("/chat-history?tag=parity:odd&tag=all:yes").json()
    assert [s["conversationKey"] for s in both] == ["k1", "k3", "k5"]
    assert http.get("/chat-history?tag=parity:odd&tag=parity:even").json() == []
    assert http.get("/chat-history?tag=nobody:x").json() == []


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=1001", "limit=x", "after=", "after=bad%20key", "tag=novalue", "tag=:x", "after=%00", "limt=2"],
)
def test_bad_listing_parameters_are_400(http: httpx.Client, query: str) -> None:
    response = http.get(f"/chat-history?{query}")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"


def test_a_fork_records_its_origin_in_tags(http: httpx.Client) -> None:
    append(http, "origin", 3)
    location = http.post("/chat-history/origin/fork?through=2").headers["location"]
    key = location.rsplit("/", 1)[1]
    [fork] = http.get("/chat-history?tag=chatlab.forkOf:origin").json()
    assert fork["conversationKey"] == key and fork["messageCount"] == 2
    assert fork["tags"] == {"chatlab.forkOf": "origin", "chatlab.forkThrough": "2"}
    whole = http.post("/chat-history/origin/fork").headers["location"].rsplit("/", 1)[1]
    tags = {s["conversationKey"]: s.get("tags") for s in http.get("/chat-history").json()}
    assert tags[whole] == {"chatlab.forkOf": "origin", "chatlab.forkThrough": "3"} and tags["origin"] is None


def test_the_clients_page_and_patch(service, http: httpx.Client) -> None:
    for key in KEYS:
        append(http, key)
    with ChatHistoryClient(service.url) as client:
        assert [s.conversation_key for s in client.iter_summaries(page_size=3)] == sorted(KEYS)
        page = client.summaries_page(limit=4)
        assert len(page.summaries) == 4 and page.next_after == sorted(KEYS)[3]
        summary = client.patch("x", {"title": "the x", "tags": {"team": "blue"}})
        assert (summary.title, dict(summary.tags)) == ("the x", {"team": "blue"})
        assert [s.conversation_key for s in client.summaries(tags={"team": "blue"})] == ["x"]
        assert client.summaries(after="x") == [s for s in client.summaries() if s.conversation_key > "x"]

    async def walk() -> list[str]:
        async with AsyncChatHistoryClient(service.url) as client:
            await client.patch("z", {"tags": {"team": "blue"}})
            return [s.conversation_key async for s in client.iter_summaries(page_size=1, tags={"team": "blue"})]

    import asyncio

    assert asyncio.run(walk()) == ["x", "z"]


def test_the_openapi_description_has_paging_and_patch(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    listing = paths["/chat-history"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {"limit", "after", "tag"}
    assert "Link" in listing["responses"]["200"]["headers"]
    patch = paths["/chat-history/{conversationKey}"]["patch"]
    assert patch["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("ConversationMetadataPatch")
