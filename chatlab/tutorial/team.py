"""A planner and a worker: two agents of the tutorial sharing one conversation (notebook 09, docs/agents.md).

Their instructions name their parts, which the offline model plays (:mod:`.offline_model`): the planner plans the
user's newest question; the worker answers it and says which plan it was shown, and as whose words.
"""

from __future__ import annotations

from typing import Any

from agent_framework import Agent, HistoryProvider

PLANNER_NAME = "Planner"
WORKER_NAME = "Worker"
PLANNER_INSTRUCTIONS = "You are the planner: write a short plan for the user's newest question. Do not answer it."
WORKER_INSTRUCTIONS = "You are the worker: answer the user's newest question, following the newest plan."


def create_planner(client: Any, provider: HistoryProvider, *, name: str = PLANNER_NAME, **kwargs: Any) -> Agent:
    """A planner agent (named ``name``) on a chat client (:func:`chatlab.connect_llm`) with its history provider."""
    return _create(client, provider, name, PLANNER_INSTRUCTIONS, **kwargs)


def create_worker(client: Any, provider: HistoryProvider, *, name: str = WORKER_NAME, **kwargs: Any) -> Agent:
    """A worker agent (named ``name``) on a chat client (:func:`chatlab.connect_llm`) with its history provider."""
    return _create(client, provider, name, WORKER_INSTRUCTIONS, **kwargs)


def _create(client: Any, provider: HistoryProvider, name: str, instructions: str, **kwargs: Any) -> Agent:
    agent: Agent = client.as_agent(name=name, instructions=instructions, context_providers=[provider], **kwargs)
    return agent
