"""The article's run end to end: the real MAF agent, the offline model and the service, over real HTTP."""

from __future__ import annotations

import json
import re
import socket
from datetime import datetime
from typing import Any

import httpx
import pytest
from agent_framework import AgentSession, tool

from chatlab.client.errors import ChatHistoryServiceStatusError, ChatHistoryServiceUnavailable
from chatlab.client.provider import RemoteChatHistoryProvider, show_provider_calls
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.tutorial.agent import AGENT_DESCRIPTION, AGENT_INSTRUCTIONS, create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
FIRST, AGAIN, ELAPSED = ARTICLE_PROMPTS
STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


@pytest.fixture(autouse=True)
def no_real_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever runs on this machine, these tests use the offline model."""
    monkeypatch.setenv("CHATLAB_LLM", "offline")


async def tool_results(provider: RemoteChatHistoryProvider, session: AgentSession) -> list[str]:
    """The GetDateTime results stored for a session, in order, read back from the service."""
    messages = await provider.get_messages(session)
    return [c.result for m in messages for c in m.contents if c.type == "function_result"]


def seconds_between(first: str, last: str) -> int:
    return int((datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds())


async def test_the_article_run_stores_4_8_10_and_4(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session1, session2 = agent.create_session(), agent.create_session()
        assert await provider.get_conversation_summaries() == []

        counts, answers = [], []
        for prompt in ARTICLE_PROMPTS:
            answers.append((await agent.run(prompt, session=session1)).text)
            counts.append(await provider.get_stored_message_count(provider.conversation_key(session1)))
        await agent.run(FIRST, session=session2)

        assert counts == [4, 8, 10]
        summaries = {s.conversation_key: s.message_count for s in await provider.get_conversation_summaries()}
        key1, key2 = provider.conversation_key(session1), provider.conversation_key(session2)
        assert summaries == {key1: 10, key2: 4} and key1 != key2

        first, second = await tool_results(provider, session1)
        assert answers[0] == f"現在の日時は **{first}** です。"
        assert answers[1] == f"現在の日時は **{second}** です。"
        assert answers[2] == (
            f"最初に取得した時刻（{first}）から、今回の取得時刻（{second}）まで "
            f"**{seconds_between(first, second)} 秒** が経過しています。"
        )

        roles = [m.role for m in await provider.get_messages(session1)]
        assert roles == ["user", "assistant", "tool", "assistant"] * 2 + ["user", "assistant"]


async def test_streaming_runs_store_the_same_counts(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        counts, streamed = [], []
        for prompt in ARTICLE_PROMPTS:
            stream = agent.run(prompt, session=session, stream=True)
            streamed.append("".join([update.text async for update in stream]))
            assert (await stream.get_final_response()).text == streamed[-1]
            counts.append(await provider.get_stored_message_count(provider.conversation_key(session)))
        assert counts == [4, 8, 10]
        first, second = await tool_results(provider, session)
        assert f"**{seconds_between(first, second)} 秒**" in streamed[2]


async def test_the_agent_is_the_articles(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        assert (agent.name, agent.description) == ("SampleAgent", AGENT_DESCRIPTION)
        assert agent.default_options["instructions"] == AGENT_INSTRUCTIONS
        assert agent.default_options["max_tokens"] == 5000
        assert [t.name for t in agent.default_options["tools"]] == ["GetDateTime"]


async def test_the_session_state_holds_only_the_key(service: BackgroundServer, llm: LLMConnection) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        await agent.run(AGAIN, session=session)

        state = json.loads(json.dumps(session.to_dict()))["state"]
        assert list(state) == ["RemoteChatHistoryProvider"]
        assert list(state["RemoteChatHistoryProvider"]) == ["externalConversationKey"]
        assert re.fullmatch(r"[0-9a-f]{32}", state["RemoteChatHistoryProvider"]["externalConversationKey"])


async def test_a_serialized_session_continues_with_a_new_provider_and_agent(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        await agent.run(AGAIN, session=session)
        saved = json.dumps(session.to_dict())  # what another process would receive
        first, second = await tool_results(provider, session)

    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        resumed = AgentSession.from_dict(json.loads(saved))
        answer = (await agent.run(ELAPSED, session=resumed)).text
        assert f"（{first}）" in answer and f"（{second}）" in answer
        assert f"**{seconds_between(first, second)} 秒**" in answer
        assert await provider.get_stored_message_count(provider.conversation_key(resumed)) == 10


class ForgetfulProvider(RemoteChatHistoryProvider):
    """Stores like the real one, but loads nothing: a broken history provider."""

    async def get_messages(self, session_id: Any = None, *, state: Any = None, **kwargs: Any) -> list[Any]:
        return []


async def test_without_the_history_the_third_answer_visibly_fails(
    service: BackgroundServer, llm: LLMConnection
) -> None:
    async with ForgetfulProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        for prompt in (FIRST, AGAIN):
            await agent.run(prompt, session=session)
        answer = (await agent.run(ELAPSED, session=session)).text
    assert "秒** が経過" not in answer and not STAMP.search(answer)
    assert "見つからない" in answer and "計算できません" in answer


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_service_down_before_a_run_raises_the_clear_error(llm: LLMConnection) -> None:
    url = f"http://127.0.0.1:{_dead_port()}"
    async with RemoteChatHistoryProvider(url) as provider:
        agent = create_agent(llm.client, provider)
        with pytest.raises(ChatHistoryServiceUnavailable) as caught:
            await agent.run(FIRST, session=agent.create_session())
    message = str(caught.value)
    assert url in message and "python -m chatlab serve --port 5000" in message and "CHAT_HISTORY_SERVICE_URL" in message
    assert caught.value.status is None


async def test_service_stopped_mid_conversation_loses_nothing(llm: LLMConnection) -> None:
    store = InMemoryChatHistoryStore()
    server = BackgroundServer(create_app(store), name="test-service-to-stop").start()
    port = server.port

    @tool(name="GetDateTime", description="現在の日時を取得します。")
    def get_date_time_and_stop_the_service() -> str:
        """The service goes away while the agent is running (after the history was loaded)."""
        server.stop()
        return datetime.now().strftime("%Y-%m-%d %H:%M:%S")

    try:
        async with RemoteChatHistoryProvider(server.url) as provider:
            agent = create_agent(llm.client, provider)
            session = agent.create_session()
            await agent.run(FIRST, session=session)
            key = provider.conversation_key(session)
            stored_before = await store.get(key)
            assert len(stored_before) == 4

            stopping = llm.client.as_agent(
                name="SampleAgent", tools=[get_date_time_and_stop_the_service], context_providers=[provider]
            )
            with pytest.raises(ChatHistoryServiceUnavailable) as caught:
                await stopping.run(AGAIN, session=session)
            assert "POST" in str(caught.value) and server.url in str(caught.value)
            assert await store.get(key) == stored_before  # nothing of the failed run, nothing lost

            server = BackgroundServer(create_app(store), name="test-service-to-stop", port=port).start()
            await agent.run(AGAIN, session=session)  # the conversation goes on where it was
            assert await provider.get_stored_message_count(key) == 8
    finally:
        server.stop()


async def test_an_error_status_raises_and_appends_nothing(llm: LLMConnection) -> None:
    store = InMemoryChatHistoryStore()
    with BackgroundServer(create_app(store, ServiceSettings(max_messages=3)), name="test-small-service") as server:
        async with RemoteChatHistoryProvider(server.url) as provider:
            agent = create_agent(llm.client, provider)
            session = agent.create_session()
            with pytest.raises(ChatHistoryServiceStatusError) as caught:
                await agent.run(FIRST, session=session)  # 4 messages in one POST; the limit is 3
    assert caught.value.status == 413
    assert "HTTP 413" in str(caught.value) and server.url in str(caught.value) and "limit is 3" in str(caught.value)
    assert await store.summaries() == []


async def test_a_slow_service_times_out_with_the_clear_error() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        async with RemoteChatHistoryProvider(url, timeout=0.2) as provider:
            with pytest.raises(ChatHistoryServiceUnavailable, match="timed out") as caught:
                await provider.get_conversation_summaries()
    assert url in str(caught.value)


async def test_a_caller_owned_client_is_used_and_left_open(service: BackgroundServer, llm: LLMConnection) -> None:
    async with httpx.AsyncClient(base_url=service.url) as http:
        provider = RemoteChatHistoryProvider(http_client=http)
        assert provider.url == service.url
        agent = create_agent(llm.client, provider)
        await agent.run(FIRST, session=agent.create_session())
        await provider.aclose()
        assert not http.is_closed
        assert len((await http.get("/chat-history")).json()) == 1


async def test_show_provider_calls_prints_the_articles_lines(
    service: BackgroundServer, llm: LLMConnection, capsys: pytest.CaptureFixture[str]
) -> None:
    async with RemoteChatHistoryProvider(service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)  # not shown yet
        show_provider_calls()
        try:
            await agent.run(AGAIN, session=session)
        finally:
            show_provider_calls(False)
        await agent.run(ELAPSED, session=session)  # switched off again
        key = provider.conversation_key(session)
    assert capsys.readouterr().out.splitlines() == [
        "[ProvideChatHistoryAsync]",
        f"Found messages for ExternalConversationKey: {key}",
        "Messages Count: 4",
        "First Message: user , [text]",
        "[StoreChatHistoryAsync]",
        f"Storing messages for ExternalConversationKey: {key}",
        "ResponseMessages Count: 3",
        "First ResponseMessage: assistant , [function_call]",
    ]
