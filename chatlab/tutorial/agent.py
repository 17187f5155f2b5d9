"""The article's agent: ``SampleAgent`` with the ``GetDateTime`` tool and a history provider."""

from __future__ import annotations

from typing import Any

from agent_framework import Agent, HistoryProvider

from .llm import output_bound_options
from .tools import GetDateTime

AGENT_NAME = "SampleAgent"
AGENT_INSTRUCTIONS = (
    "ユーザーの質問に対して適切なツールを使用して回答してください。"
    "日時は必ず{{GetDateTime}}で最新の情報を取得してください"
)
AGENT_DESCRIPTION = "このAI Agentは日時に関する情報を提供します。"
MAX_OUTPUT_TOKENS = 5000


def create_agent(
    client: Any, provider: HistoryProvider, *, max_output_tokens: int = MAX_OUTPUT_TOKENS, **kwargs: Any
) -> Agent:
    """The article's ``chatClient.AsAIAgent(...)`` on a chat client (:func:`chatlab.connect_llm`); its output bound
    (the article's 5000 unless given: a slow local model finishes sooner with less) reaches servers that read either
    name of it (:func:`~chatlab.tutorial.llm.output_bound_options`)."""
    agent: Agent = client.as_agent(
        name=AGENT_NAME,
        instructions=AGENT_INSTRUCTIONS,
        description=AGENT_DESCRIPTION,
        tools=[GetDateTime],
        default_options=output_bound_options(max_output_tokens, client),
        context_providers=[provider],
        **kwargs,
    )
    return agent
