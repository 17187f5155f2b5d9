"""Traces, opt-in: one agent run gives one trace, agent -> load -> service -> store, then save, and no span attribute
holds the conversation key except ``gen_ai.conversation.id``.

The real agent on the offline model, a real service over HTTP with ``traces=True``, and the OpenTelemetry SDK's
in-memory exporter as the application's tracer provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.tracing import CONVERSATION_ID
from chatlab.runner import BackgroundServer
from chatlab.service import ServiceSettings, create_app
from chatlab.stores import InMemoryChatHistoryStore
from chatlab.tutorial.agent import create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import LLMConnection

pytestmark = pytest.mark.anyio
FIRST, AGAIN, _ = ARTICLE_PROMPTS
_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once: OpenTelemetry allows one), its spans cleared for each test."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture
def traced_service(spans: InMemorySpanExporter) -> Iterator[BackgroundServer]:
    app = create_app(InMemoryChatHistoryStore(), ServiceSettings(traces=True))
    with BackgroundServer(app, name="traced-service") as server:
        yield server


def parent_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return by_id.get(span.parent.span_id) if span.parent is not None else None


def chain(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    """The span's name and its ancestors' up to the root."""
    names = []
    current: ReadableSpan | None = span
    while current is not None:
        names.append(current.name)
        current = parent_of(current, by_id)
    return names


@dataclass
class TwoTurns:
    """The article's first two turns through a traced service: the key, and the spans of each turn."""

    key: str
    first: tuple[ReadableSpan, ...]
    second: tuple[ReadableSpan, ...]


@pytest.fixture
async def two_turns(traced_service: BackgroundServer, llm: LLMConnection, spans: InMemorySpanExporter) -> TwoTurns:
    async with RemoteChatHistoryProvider(traced_service.url) as provider:
        agent = create_agent(llm.client, provider)
        session = agent.create_session()
        await agent.run(FIRST, session=session)
        first = spans.get_finished_spans()
        spans.clear()
        await agent.run(AGAIN, session=session)  # a second turn: an incremental load
        return TwoTurns(provider.conversation_key(session), first, spans.get_finished_spans())


async def test_one_run_is_one_trace_from_the_agent_to_the_store(two_turns: TwoTurns) -> None:
    key = two_turns.key
    finished = two_turns.second
    agent_span = next(span for span in finished if span.name.startswith("invoke_agent"))
    ours = [span for span in finished if span.context.trace_id == agent_span.context.trace_id]
    others = [span for span in finished if span not in ours]  # the offline model's own server, a stand-in LLM
    assert all(span.name.startswith(("POST /v1/", "fastapi.")) for span in others)
    by_id = {span.context.span_id: span for span in ours}
    assert agent_span.attributes is not None and agent_span.attributes[CONVERSATION_ID] == key
    load = next(span for span in ours if span.name == "chatlab.history.load")
    save = next(span for span in ours if span.name == "chatlab.history.save")
    assert parent_of(load, by_id) is agent_span and parent_of(save, by_id) is agent_span
    assert load.attributes is not None and load.attributes["chatlab.history.read"] == "incremental"
    assert load.attributes["chatlab.history.messages"] == 4 and load.attributes["chatlab.history.bytes"] > 0
    assert save.attributes is not None and save.attributes["chatlab.history.messages"] == 4
    store_read = next(span for span in ours if span.name == "store read_slice")
    assert chain(store_read, by_id) == [
        "store read_slice",
        "GET /chat-history/{conversationKey}",
        "chatlab.history.load",
        agent_span.name,
    ]
    store_append = next(span for span in ours if span.name == "store append")
    assert chain(store_append, by_id)[1:3] == ["POST /chat-history/{conversationKey}", "chatlab.history.save"]


async def test_no_span_attribute_holds_the_key_but_the_conversation_id(two_turns: TwoTurns) -> None:
    key = two_turns.key
    finished = [*two_turns.first, *two_turns.second]
    server_spans = [span for span in finished if span.kind is trace.SpanKind.SERVER]
    assert server_spans  # the service traced its requests
    for span in finished:
        assert key not in span.name
        for name, value in (span.attributes or {}).items():
            assert name == CONVERSATION_ID or key not in str(value), f"{span.name}: {name} holds the key"
