"""Notebook 4, "On your own": resume a conversation by its key in a new Python process."""

import subprocess
import sys

# What the new process runs: the article's CreateOrResumeSessionAsync with the reader's provider.
CODE = """
import asyncio
import sys

import chatlab
from remote_provider import RemoteChatHistoryProvider


async def main(service_url: str, key: str) -> None:
    llm = await chatlab.connect_llm(announce=False)
    provider = RemoteChatHistoryProvider(service_url)
    try:
        agent = chatlab.create_agent(llm.client, provider)
        session = await chatlab.create_or_resume_session(agent, provider, key)
        chatlab.print_agent_response(await agent.run("最初の時刻からどれくらい経過していますか?", session=session))
    finally:
        await provider.aclose()
        await llm.aclose()


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def resume_in_new_process(service_url: str, key: str) -> str:
    """Run ``CODE`` in a new interpreter (from this folder, where ``remote_provider.py`` is); its output as text."""
    result = subprocess.run(
        [sys.executable, "-c", CODE, service_url, key], capture_output=True, text=True, timeout=300, check=False
    )
    return result.stdout + result.stderr
