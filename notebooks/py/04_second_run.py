# %% [markdown]
# # 4. The second run, with the service kept running
#
# **What this shows.** The article's section 6 (チャット履歴管理サーバーを保持したまま2回目の実行): the program runs a
# second time, with a new provider and a new agent, against the same service. The store already lists the first run's
# keys; new sessions get new keys. Then what the article's `CreateOrResumeSessionAsync` is for: resuming a session by
# its key, and resuming one from a serialized session.
#
# **What it needs.** `chatlab` installed; an LLM is optional, as in [notebook 3](03_running_the_agent.ipynb). The first
# run is a separate process, `python -m chatlab demo --runs 1`, pointed at this notebook's service.
#
# Previous: [3. Running the agent](03_running_the_agent.ipynb) ·
# Next: [5. Swapping the store](05_swapping_the_store.ipynb)

# %%
import asyncio
import sys

import chatlab
from chatlab.service import ensure_service

service = ensure_service()


# %% [markdown]
# ## The first run, in another process
#
# The same scenario as notebook 3, run by the demo command as its own process. Its provider and agent live and die in
# that process; only the service keeps what they stored. (`asyncio.create_subprocess_exec` keeps the notebook's event
# loop free while it runs.)

# %% tags=["real-llm-varies"]
async def conversation_keys() -> set[str]:
    async with chatlab.RemoteChatHistoryProvider(service.url) as observer:
        return {summary.conversation_key for summary in await observer.get_conversation_summaries()}

before = await conversation_keys()  # a service you started yourself may hold conversations already
first_run = await asyncio.create_subprocess_exec(
    sys.executable, "-m", "chatlab", "demo", "--runs", "1", "--pause", "1", "--service-url", service.url,
    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
)
output, _ = await first_run.communicate()
print("exit code:", first_run.returncode)
print(*output.decode().splitlines()[-11:], sep="\n")  # its last [External Store] and the state bags
first_run_keys = sorted(await conversation_keys() - before)  # keys sort in the order the sessions began

# %% [markdown]
# ## The second run: a new provider and a new agent
#
# Before any new session runs, the store already lists the two conversations of the first run: the provider was created
# anew, but the history stayed with the service.

# %% tags=["real-llm-varies"]
llm = await chatlab.connect_llm()
provider = chatlab.RemoteChatHistoryProvider(service.url)
agent = chatlab.create_agent(llm.client, provider)
chatlab.show_provider_calls()

session1 = await chatlab.create_or_resume_session(agent, provider, None)
session2 = agent.create_session()
await chatlab.print_external_store(provider)

# %% tags=["real-llm-varies"]
response = await agent.run("現在時刻を教えてください", session=session1)
chatlab.print_agent_response(response)
chatlab.print_session_id("Session1", provider, session1)
await chatlab.print_external_store(provider)

# %% tags=["real-llm-varies"]
await asyncio.sleep(1)
response = await agent.run("もう一度現在時刻を取得してください", session=session1)
chatlab.print_agent_response(response)
await chatlab.print_external_store(provider)

# %% tags=["real-llm-varies"]
response = await agent.run("最初の時刻からどれくらい経過していますか?", session=session1)
chatlab.print_agent_response(response)
await chatlab.print_external_store(provider)

# %% tags=["real-llm-varies"]
response2 = await agent.run("現在時刻を教えてください", session=session2)
chatlab.print_agent_response(response2)
chatlab.print_session_id("Session2", provider, session2)
await chatlab.print_external_store(provider)

# %%
print("[Session1]")
chatlab.print_state_bag(session1)
print("[Session2]")
chatlab.print_state_bag(session2)

# %% [markdown]
# ## Resuming a session by its key
#
# `create_or_resume_session` is the article's `CreateOrResumeSessionAsync`: with a key the service knows, it attaches a
# new session to that conversation (`AttachToSession`); with an unknown key it starts a new one. The resumed session
# answers from the whole earlier conversation: the first conversation of the first run, from the other process.

# %% tags=["real-llm-varies"]
resumed = await chatlab.create_or_resume_session(agent, provider, first_run_keys[0])
response = await agent.run("最初の時刻からどれくらい経過していますか?", session=resumed)
chatlab.print_agent_response(response)
await chatlab.print_external_store(provider)

# %%
chatlab.show_provider_calls(False)
unknown = await chatlab.create_or_resume_session(agent, provider, chatlab.client.provider.new_conversation_key())
print(provider.try_get_external_conversation_key(unknown))

# %% [markdown]
# ## Resuming from a serialized session
#
# Since the state holds only the key, a session is a few bytes of JSON: save `session.to_dict()` anywhere, restore it
# with `AgentSession.from_dict()` in another process (here: with another provider and agent), and the conversation
# goes on. Session 2 above asked for the time once; restored, it asks again and then how long has passed since the
# first time. The answer measures from the time session 2 got in its first run: the restored session loaded that run's
# messages through its key (4 -> 8 -> 10 messages, as session 1 in the article).

# %% tags=["real-llm-varies"]
import json

from agent_framework import AgentSession

saved = json.dumps(session2.to_dict())
print(saved)

async with chatlab.RemoteChatHistoryProvider(service.url) as other_provider:
    other_agent = chatlab.create_agent(llm.client, other_provider)
    restored = AgentSession.from_dict(json.loads(saved))
    await asyncio.sleep(1)  # a second later than session 2's first answer
    for prompt in ("もう一度現在時刻を取得してください", "最初の時刻からどれくらい経過していますか?"):
        chatlab.print_agent_response(await other_agent.run(prompt, session=restored))
    print("Messages Count:", await other_provider.get_stored_message_count(other_provider.conversation_key(restored)))


# %% [markdown]
# ## まとめ (summary)
#
# This is where the article ends. What it showed, and what the notebooks showed with it:
#
# - **The history moved out of the process.** The provider's store is a chat history service reached over HTTP
#   (チャット履歴を外部化できました): notebook 1 wrote it as a FastAPI app, and `chatlab.service` answers the same.
# - **The session keeps only a key.** `RemoteChatHistoryProvider` keeps `{"externalConversationKey": ...}` in the
#   session's state and reads and appends the history over HTTP (notebook 2 wrote it as a `HistoryProvider` subclass;
#   `chatlab.RemoteChatHistoryProvider` is the same contract).
# - **Each session is its own conversation.** Every session gets its own key, so conversations stay apart (notebook 3),
#   and a new provider in a new process finds them again as long as the service runs (this notebook).
# - **The store behind the API can change.** The article's service keeps the history in memory; since the provider only
#   sees the HTTP API, a persistent store can take its place without touching the agent side
#   ([notebook 5](05_swapping_the_store.ipynb)). What the article lists as missing for production, authentication and
#   the rest, is [notebook 6](06_protections.ipynb).
#
# Stop what this notebook started:

# %%
await provider.aclose()
await llm.aclose()
if llm.offline_server is not None:
    llm.offline_server.stop()
service.stop()
