"""Who took part, on every store through real HTTP: each store counts a conversation's authors in the same atomic step
as its write, so a listing row, a ``PATCH`` answer and ``/participants`` all show the same counts, in one order (most
first, ties by name), after appends by two authors, a replace, a fork, an import, a delete and a retention sweep."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from chatlab.client.http import ChatHistoryClient
from chatlab.operations import ServicePlace, import_conversations
from chatlab.operations.lines import encode_line
from chatlab.runner import BackgroundServer
from chatlab.stores import open_store


def said(text: str, author: str | None = None) -> dict[str, Any]:
    """A message: the user's, or an assistant's signed by ``author``."""
    message: dict[str, Any] = {"role": "assistant" if author else "user", "contents": [{"$type": "text", "text": text}]}
    if author:
        message["authorName"] = author
    return message


def ranked(*counts: tuple[str, int]) -> list[dict[str, Any]]:
    """Participants as the service answers them."""
    return [{"authorName": name, "messageCount": count} for name, count in counts]


def listed(http: httpx.Client) -> dict[str, Any]:
    """Each listed conversation's participants (``None``: its row has none)."""
    answer = http.get("/chat-history")
    assert answer.status_code == 200
    return {row["conversationKey"]: row.get("participants") for row in answer.json()}


def counted(http: httpx.Client, key: str) -> list[dict[str, Any]]:
    """``/participants`` of ``key``, checked to agree with the conversation's listing row."""
    answer = http.get(f"/chat-history/{key}/participants")
    assert answer.status_code == 200
    participants: list[dict[str, Any]] = answer.json()["participants"]
    assert listed(http).get(key) == (participants or None)
    return participants


def append(http: httpx.Client, key: str, *messages: dict[str, Any]) -> None:
    assert http.post(f"/chat-history/{key}", json={"messages": list(messages)}).status_code == 202


def test_two_authors_appending_are_counted_in_the_listing_and_the_patch_answer(service: BackgroundServer) -> None:
    with httpx.Client(base_url=service.url) as http:
        append(http, "team", said("q?"), said("plan", "Planner"))
        append(http, "team", said("done", "Worker"))
        append(http, "team", said("more", "Worker"), said("check", "Planner"), said("again", "Planner"))
        assert counted(http, "team") == ranked(("Planner", 3), ("Worker", 2))
        patched = http.patch("/chat-history/team", json={"title": "Team"})
        assert patched.status_code == 200
        assert patched.json()["participants"] == ranked(("Planner", 3), ("Worker", 2))
        append(http, "tie", said("z", "Zed"), said("a", "Alpha"))  # Zed wrote first; ties go by name
        assert counted(http, "tie") == ranked(("Alpha", 1), ("Zed", 1))
        append(http, "plain", said("nobody signs"))
        assert counted(http, "plain") == [] and listed(http)["plain"] is None  # no field, like tags
        assert counted(http, "nobody") == []
    with ChatHistoryClient(service.url) as client:  # the client's summaries carry them, in the service's order
        summaries = {s.conversation_key: s for s in client.summaries()}
        assert list(summaries["team"].participants.items()) == [("Planner", 3), ("Worker", 2)]
        assert dict(summaries["plain"].participants) == {}


def test_a_replace_a_fork_and_a_delete_recount(service: BackgroundServer) -> None:
    with httpx.Client(base_url=service.url) as http:
        append(http, "origin", said("p", "Planner"), said("w", "Worker"), said("w2", "Worker"))
        assert counted(http, "origin") == ranked(("Worker", 2), ("Planner", 1))
        assert http.post("/chat-history/origin/fork?through=2&key=branch").status_code == 201
        assert counted(http, "branch") == ranked(("Planner", 1), ("Worker", 1))  # its first two messages only
        assert http.put("/chat-history/origin", json={"messages": [said("c", "Checker")]}).status_code == 204
        assert counted(http, "origin") == ranked(("Checker", 1))
        assert http.delete("/chat-history/origin").status_code == 204
        assert "origin" not in listed(http) and counted(http, "origin") == []
        append(http, "origin", said("again", "Planner"))  # a new conversation under the old key: counted afresh
        assert counted(http, "origin") == ranked(("Planner", 1))


def test_an_import_is_counted_as_its_writes_are(service: BackgroundServer) -> None:
    def line(key: str, *messages: dict[str, Any]) -> bytes:
        return encode_line(key, [json.dumps(m).encode() for m in messages])

    async def run(lines: list[bytes], existing: str) -> None:
        place = ServicePlace(service.url)
        try:
            await import_conversations(place, lines, existing)
        finally:
            await place.close()

    first = [said("q"), said("a", "Planner")]
    asyncio.run(run([line("imported", *first)], "skip"))
    with httpx.Client(base_url=service.url) as http:
        assert counted(http, "imported") == ranked(("Planner", 1))
        asyncio.run(run([line("imported", said("b", "Worker"), said("c", "Worker"))], "append"))
        assert counted(http, "imported") == ranked(("Worker", 2), ("Planner", 1))


def test_a_sweep_drops_the_counts_with_the_conversation(store_url: str) -> None:
    """Retention deletes a conversation whole: written again, its key starts from no participants."""
    signed = json.dumps(said("p", "Planner")).encode()

    async def work() -> None:
        store = open_store(store_url)
        try:
            await store.append("kept", [signed, signed])
            store.retention = 0.0
            assert await store.sweep() == 1
            store.retention = None  # kept from now on (Redis would expire a write at once)
            await store.append("kept", [signed])
            [summary] = await store.summaries()
            assert dict(summary.participants) == {"Planner": 1}
        finally:
            await store.close()

    asyncio.run(work())
