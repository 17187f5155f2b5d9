"""The article's ``MaxOutputTokens = 5000`` reaches servers that read either name of it: the requests the real agent
sends over HTTP, and the offline model stopping at either."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agent_framework import InMemoryHistoryProvider
from agent_framework.openai import OpenAIChatCompletionClient
from openai import AsyncOpenAI, OpenAI

from chatlab.runner import BackgroundServer
from chatlab.tutorial.agent import MAX_OUTPUT_TOKENS, create_agent
from chatlab.tutorial.demo import ARTICLE_PROMPTS
from chatlab.tutorial.llm import output_bound_options
from chatlab.tutorial.offline_model import OFFLINE_MODEL_ID, create_offline_app

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with BackgroundServer(create_offline_app(), name="test-bound-endpoint") as server:
        yield f"{server.url}/v1"


@pytest.mark.parametrize(
    "base_url",
    ["http://localhost:1234/v1", "http://127.0.0.1:8080/v1", "https://llm.example.org/v1", "http://openai.local/v1"],
)
def test_a_server_other_than_openais_gets_both_names(base_url: str) -> None:
    client = OpenAIChatCompletionClient(model="m", base_url=base_url, api_key="sk-dummy")
    assert output_bound_options(5000, client) == {"max_tokens": 5000, "extra_body": {"max_tokens": 5000}}


@pytest.mark.parametrize("base_url", ["https://api.openai.com/v1", "https://my-lab.openai.azure.com/openai/v1"])
def test_openai_which_refuses_both_gets_max_completion_tokens_only(base_url: str) -> None:
    client = OpenAIChatCompletionClient(model="m", base_url=base_url, api_key="sk-dummy")
    assert output_bound_options(5000, client) == {"max_tokens": 5000}


@pytest.mark.parametrize("bound", [0, -5])
def test_a_bound_below_one_token_is_refused(bound: int) -> None:
    client = OpenAIChatCompletionClient(model="m", base_url="http://localhost:1234/v1", api_key="sk-dummy")
    with pytest.raises(ValueError, match=f"at least 1 token, not {bound}: give a positive number"):
        output_bound_options(bound, client)


@pytest.mark.parametrize("bound", [MAX_OUTPUT_TOKENS, 64])
async def test_every_request_of_the_agent_carries_both(endpoint: str, bound: int) -> None:
    bodies: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        sdk = AsyncOpenAI(base_url=endpoint, api_key="sk-dummy", http_client=http)
        client = OpenAIChatCompletionClient(model=OFFLINE_MODEL_ID, async_client=sdk)
        agent = create_agent(client, InMemoryHistoryProvider(), max_output_tokens=bound)
        response = await agent.run(ARTICLE_PROMPTS[0], session=agent.create_session())

    assert [c.type for m in response.messages for c in m.contents][:2] == ["function_call", "function_result"]
    assert len(bodies) == 2  # the tool call, then the answer after the tool result
    for body in bodies:
        assert (body["max_completion_tokens"], body["max_tokens"]) == (bound, bound)


@pytest.mark.parametrize("name", ["max_tokens", "max_completion_tokens"])
def test_the_offline_model_stops_at_either_name(endpoint: str, name: str) -> None:
    client = OpenAI(base_url=endpoint, api_key="sk-dummy")
    ask: dict[str, Any] = {"model": OFFLINE_MODEL_ID, "messages": [{"role": "user", "content": "Tell me a joke"}]}
    whole = client.chat.completions.create(**ask)
    cut = client.chat.completions.create(**ask, **{name: 4})
    assert whole.choices[0].finish_reason == "stop" and whole.usage is not None and whole.usage.completion_tokens > 4
    assert cut.choices[0].finish_reason == "length" and cut.usage is not None and cut.usage.completion_tokens == 4
    assert whole.choices[0].message.content is not None
    assert cut.choices[0].message.content == whole.choices[0].message.content[:16]
