"""The provider's incremental view always equals a full read, whatever other clients do, on every store.

Two providers with their caches share one conversation with a plain client that appends,
replaces and deletes behind their backs; hypothesis chooses the interleaving (request by
request, plus runs where a provider's turn and another client's write are in flight at once).
After every step each provider's view must be exactly what a fresh full read returns, and its
own appends must be in it once.
"""

from __future__ import annotations

import asyncio
import itertools

import httpx
from agent_framework import AgentSession, Content, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatlab.client import AsyncChatHistoryClient
from chatlab.client.codec import messages_to_meai
from chatlab.client.provider import KEY_FIELD, RemoteChatHistoryProvider
from chatlab.runner import BackgroundServer

_counter = itertools.count()


def _messages(tag: str, n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        if i % 3 == 1:
            out.append(Message("assistant", [Content.from_function_call(f"{tag}-{i}", "GetDateTime", arguments="{}")]))
        elif i % 3 == 2:
            out.append(Message("tool", [Content.from_function_result(f"{tag}-{i - 1}", result=f"r {tag} {i}")]))
        else:
            out.append(Message("user", [f"{tag} {i}"]))
    return out


def _wire(tag: str, n: int) -> list[dict]:
    return messages_to_meai(_messages(tag, n))


# One step: who does what. p0/p1 are the two providers, "other" a plain client of the service.
steps = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 1), st.integers(1, 4)),  # load, then append n (one agent run)
    st.tuples(st.just("load"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("save"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("set"), st.integers(0, 1), st.integers(0, 3)),  # the provider replaces (PUT)
    st.tuples(st.just("append"), st.just(-1), st.integers(1, 5)),
    st.tuples(st.just("replace"), st.just(-1), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.just(-1), st.just(0)),
    st.tuples(st.just("race"), st.integers(0, 1), st.integers(1, 3)),  # a turn and another client's append at once
)


async def _scenario(url: str, plan: list[tuple[str, int, int]]) -> dict[str, int]:
    """Run ``plan``, checking the providers' views after every step; the reads the providers made."""
    key = f"inc-{next(_counter)}"
    state = {KEY_FIELD: key}
    reads = {"full": 0, "after": 0}

    async def count(request: httpx.Request) -> None:
        if request.method == "GET":
            reads["after" if "after=" in str(request.url) else "full"] += 1

    async with (
        AsyncChatHistoryClient(url, timeout=30) as other,
        httpx.AsyncClient(timeout=30, event_hooks={"request": [count]}) as client0,
        httpx.AsyncClient(timeout=30, event_hooks={"request": [count]}) as client1,
        RemoteChatHistoryProvider(url) as reader,
    ):
        providers = [
            RemoteChatHistoryProvider(url, http_client=client0),
            RemoteChatHistoryProvider(url, http_client=client1, cache_size=1),
        ]
        saved: list[str] = []  # the tags a provider appended: each must be in the history exactly once

        async def full() -> list[dict]:
            return messages_to_meai(await reader.get_messages(_Session(key)))

        async def check(p: RemoteChatHistoryProvider) -> None:
            view = messages_to_meai(await p.get_messages(None, state=state))
            assert view == await full()

        for number, (action, who, n) in enumerate(plan):
            tag = f"s{number}"
            provider = providers[who] if who >= 0 else None
            if action == "turn":
                await check(provider)
                await provider.save_messages(None, _messages(tag, n), state=state)
                saved.append(tag)
            elif action == "load":
                await check(provider)
            elif action == "save":
                await provider.save_messages(None, _messages(tag, n), state=state)
                saved.append(tag)
            elif action == "set":
                session = _Session(key)
                await provider.set_messages(session, _messages(tag, n))
                saved.clear()
            elif action == "append":
                await other.append(key, _wire(tag, n))
            elif action == "replace":
                await other.replace(key, _wire(tag, n))
                saved.clear()
            elif action == "delete":
                await other.delete(key)
                saved.clear()
            elif action == "race":

                async def turn(provider: RemoteChatHistoryProvider, tag: str, n: int) -> None:
                    await provider.get_messages(None, state=state)
                    await provider.save_messages(None, _messages(tag, n), state=state)

                await asyncio.gather(
                    turn(provider, tag, n),
                    other.append(key, _wire(tag + "x", 2)),
                    providers[1 - who].get_messages(None, state=state),
                )
                saved.append(tag)
        for p in providers:
            await check(p)
        history = await full()
        texts = [c.get("text", "") for m in history for c in m["contents"]]
        for tag in saved:  # each append the providers made since the last replace/delete is there, once
            assert texts.count(f"{tag} 0") == 1, (tag, texts)
        for p in providers:
            await p.aclose()
    return reads


def _Session(key: str) -> AgentSession:
    session = AgentSession()
    session.state["RemoteChatHistoryProvider"] = {KEY_FIELD: key}
    return session


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(steps, min_size=1, max_size=14))
def test_incremental_view_equals_a_full_read(service: BackgroundServer, plan: list[tuple[str, int, int]]) -> None:
    asyncio.run(_scenario(service.url, plan))


def test_later_turns_read_only_what_is_new(service: BackgroundServer) -> None:
    plan = [("turn", 0, 4), ("turn", 0, 4), ("append", -1, 2), ("turn", 0, 4), ("load", 0, 0)]
    reads = asyncio.run(_scenario(service.url, plan))
    # a full read when a provider first sees the conversation (p0's first turn, p1 in the final
    # check); every later load of p0 (2 turns, a load, the final check) asks only for what is new,
    # another client's append included
    assert reads == {"full": 2, "after": 4}, reads


def test_a_replace_or_delete_by_another_client_makes_the_provider_read_everything(service: BackgroundServer) -> None:
    plan = [("turn", 0, 4), ("replace", -1, 3), ("turn", 0, 2), ("delete", -1, 0), ("turn", 0, 2)]
    reads = asyncio.run(_scenario(service.url, plan))
    # full reads: p0's first sight, after the replace, after the delete (each found by its
    # incremental read, whose answer is another generation), and p1's first sight at the end
    assert reads == {"full": 4, "after": 3}, reads
