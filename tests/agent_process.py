"""One agent of a shared conversation, in a process of its own (tests/test_agents_processes.py).

``python -m tests.agent_process URL KEY PART TURNS``: the planner or the worker (``PART``) asks ``TURNS`` questions of
its own on conversation ``KEY`` of the service at ``URL``, on the offline model, and prints how many runs it made.
"""

from __future__ import annotations

import asyncio
import sys

from chatlab.client.provider import RemoteChatHistoryProvider
from chatlab.client.views import others_as_input
from chatlab.tutorial.llm import connect_llm
from chatlab.tutorial.team import create_planner, create_worker


async def main(url: str, key: str, part: str, turns: int) -> None:
    """Run ``turns`` turns of the ``part`` agent, each a new session on ``key``."""
    create = {"planner": create_planner, "worker": create_worker}[part]
    llm = await connect_llm(announce=False)
    async with RemoteChatHistoryProvider(url, state_initializer=lambda _: key, view=others_as_input) as history:
        agent = create(llm.client, history)
        for turn in range(turns):
            await agent.run(f"{part} question {turn}?", session=agent.create_session())
    await llm.aclose()
    print(f"{part}: {turns} runs")


if __name__ == "__main__":
    service_url, conversation, part, turns = sys.argv[1:]
    asyncio.run(main(service_url, conversation, part, int(turns)))
