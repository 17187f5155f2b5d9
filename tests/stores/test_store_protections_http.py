"""Versions, idempotent retries and namespaces over real HTTP, with each store behind the service."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from agent_framework import Message

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.retry import RetryPolicy
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings
from tests.faults import DroppingProxy

ALICE, BOB = "alice-0123456789abcdef-key", "bob-0123456789abcdef-key"


@pytest.fixture
def settings() -> ServiceSettings:
    return ServiceSettings(api_keys={ALICE: "alice", BOB: "bob"})


def text(value: str) -> dict:
    return {"role": "user", "contents": [{"$type": "text", "text": value}]}


def test_read_modify_write_race_one_412_nothing_lost(service: BackgroundServer) -> None:
    auth = {"Authorization": f"Bearer {ALICE}"}
    url = "/chat-history/race"
    httpx.put(f"{service.url}{url}", json={"messages": [text("original")]}, headers=auth).raise_for_status()
    both_read = threading.Barrier(2, timeout=30)
    outcomes: dict[str, list[int]] = {"a": [], "b": []}

    def client(name: str) -> None:
        with httpx.Client(base_url=service.url, headers=auth, timeout=30) as c:
            for attempt in range(5):
                read = c.get(url)
                if attempt == 0:
                    both_read.wait()
                changed = c.put(
                    url, json={"messages": [*read.json(), text(name)]}, headers={"If-Match": read.headers["etag"]}
                )
                outcomes[name].append(changed.status_code)
                if changed.status_code == 204:
                    return

    threads = [threading.Thread(target=client, args=(n,)) for n in outcomes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == [[204], [412, 204]]
    texts = [m["contents"][0]["text"] for m in httpx.get(f"{service.url}{url}", headers=auth).json()]
    assert texts[0] == "original" and sorted(texts[1:]) == ["a", "b"]


def test_a_delete_after_an_append_it_did_not_see_gets_412_and_the_append_survives(service: BackgroundServer) -> None:
    url = "/chat-history/doomed"
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as c:
        c.put(url, json={"messages": [text("original")]}).raise_for_status()
        read = c.get(url)
        c.post(url, json={"messages": [text("late")]}).raise_for_status()  # another client, meanwhile
        refused = c.delete(url, headers={"If-Match": read.headers["etag"]})
        assert refused.status_code == 412 and refused.headers["content-type"] == "application/problem+json"
        now = c.get(url)
        assert [m["contents"][0]["text"] for m in now.json()] == ["original", "late"]
        assert refused.headers["etag"] == now.headers["etag"]
        assert c.delete(url, headers={"If-Match": now.headers["etag"]}).status_code == 204
        assert c.get(url).headers["etag"] == '"0"' and c.get("/chat-history").json() == []


def test_a_lost_answer_is_retried_and_stored_once(service: BackgroundServer) -> None:
    proxy = DroppingProxy(service.port)

    async def run() -> int:
        policy = RetryPolicy(backoff=0.01)
        async with RemoteChatHistoryProvider(proxy.url, api_key=ALICE, retry=policy) as provider:
            await provider.append_messages("lost", [Message(role="user", contents=["once"])])
            return await provider.get_stored_message_count("lost")

    try:
        assert asyncio.run(run()) == 1
        assert proxy.dropped == 1
    finally:
        proxy.close()


def test_namespaces_see_only_their_own_conversations(service: BackgroundServer) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as c:
        for who, key in ((ALICE, "shared"), (ALICE, "only-alice"), (BOB, "shared")):
            c.post(
                f"/chat-history/{key}", json={"messages": [text(who[:3])]}, headers={"Authorization": f"Bearer {who}"}
            )
        alice = c.get("/chat-history", headers={"Authorization": f"Bearer {ALICE}"}).json()
        bob = c.get("/chat-history", headers={"Authorization": f"Bearer {BOB}"}).json()
        assert [s["conversationKey"] for s in alice] == ["only-alice", "shared"]
        assert [s["conversationKey"] for s in bob] == ["shared"]
        assert c.get("/chat-history/only-alice", headers={"Authorization": f"Bearer {BOB}"}).json() == []
        shared = c.get("/chat-history/shared", headers={"Authorization": f"Bearer {BOB}"}).json()
        assert shared == [text("bob")]
