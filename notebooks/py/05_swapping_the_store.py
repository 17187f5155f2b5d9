# %% [markdown]
# # 5. Swapping the store
#
# **What this shows.** What the article only mentions in its explanation (保存先を差し替えやすい): the service keeps the
# history in memory, but the store behind its API can be swapped for a database while the provider and the agent stay
# exactly as they are. Here: the same provider and agent against a SQLite file; the service stopped and started again;
# the conversation still there. Then two service replicas sharing one store, the way to scale out on PostgreSQL or Redis.
#
# **What it needs.** `chatlab` installed; SQLite comes with Python. An LLM is optional, as in
# [notebook 3](03_running_the_agent.ipynb). For the replicas on PostgreSQL or Redis, install `chatlab[stores]` and set
# `CHATLAB_REPLICA_STORE` (for example `postgresql://postgres@127.0.0.1:5432/test` or `redis://127.0.0.1:6379/0`);
# without it the replicas share a SQLite file.
#
# Previous: [4. The second run](04_second_run.ipynb) ·
# Next: [6. The protections the article leaves out](06_protections.ipynb)
#
# | store | URL (`python -m chatlab serve --store URL`, `start_service(store=URL)`) | survives a restart of the service |
# |---|---|---|
# | in memory (the article's, the default) | `memory://` | no |
# | SQLite | `sqlite:///history.db` | yes (WAL, each commit synced to disk) |
# | PostgreSQL | `postgresql://user@host:5432/db` | yes, and several replicas can share it |
# | Redis | `redis://host:6379/0` | as far as Redis's own persistence settings allow; several replicas can share it |

# %%
import asyncio
import os
import tempfile
from pathlib import Path

import chatlab
from chatlab.service import start_service

workdir = Path(tempfile.mkdtemp(prefix="chatlab-"))
store = f"sqlite:///{workdir / 'chat-history.db'}"
service = start_service(store=store)
llm = await chatlab.connect_llm()

# %% [markdown]
# ## The same provider and agent, a different store
#
# Nothing on the agent side mentions the store: the provider only knows the service's URL.

# %% tags=["real-llm-varies"]
provider = chatlab.RemoteChatHistoryProvider(service.url)
agent = chatlab.create_agent(llm.client, provider)
chatlab.show_provider_calls()

session = await chatlab.create_or_resume_session(agent, provider, None)
chatlab.print_agent_response(await agent.run("現在時刻を教えてください", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# ## Stop the service and start it again
#
# While the service is down, the provider says so (and a run would fail loudly rather than lose messages). A new
# service on the same port and the same file finds the conversation where it was.

# %%
port = service.port
service.stop()
try:
    await provider.get_conversation_summaries()
except chatlab.ChatHistoryServiceError as error:
    print(type(error).__name__, "- the service is down")

service = start_service(port=port, store=store)
await chatlab.print_external_store(provider)

# %% [markdown]
# The session still holds only its key, so the conversation simply goes on: 8, then 10 messages, and the elapsed
# time is computed from the first answer, given before the restart.

# %% tags=["real-llm-varies"]
await asyncio.sleep(1)
chatlab.print_agent_response(await agent.run("もう一度現在時刻を取得してください", session=session))
chatlab.print_agent_response(await agent.run("最初の時刻からどれくらい経過していますか?", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# With the article's in-memory store, the same restart forgets everything:

# %%
from agent_framework import Message

chatlab.show_provider_calls(False)
memory_service = start_service(store="memory://", port=0)
async with chatlab.RemoteChatHistoryProvider(memory_service.url) as memory_provider:
    await memory_provider.append_messages("k1", [Message("user", ["hi"])])
    print("before the restart:", await memory_provider.get_stored_message_count("k1"))
    memory_port = memory_service.port
    memory_service.stop()
    memory_service = start_service(store="memory://", port=memory_port)
    print("after the restart: ", await memory_provider.get_stored_message_count("k1"))
memory_service.stop()

# %% [markdown]
# ## Two replicas sharing one store
#
# With PostgreSQL or Redis the service keeps no state of its own, so several replicas can serve the same conversations
# behind a load balancer. In a terminal that is:
#
# ```bash
# python -m chatlab serve --port 5001 --store postgresql://postgres@127.0.0.1:5432/test
# python -m chatlab serve --port 5002 --store postgresql://postgres@127.0.0.1:5432/test
# ```
#
# Here both replicas run in background threads, each with its own app and its own connections to the store. A
# conversation started through replica A continues through replica B.

# %%
from chatlab.runner import BackgroundServer
from chatlab.service import create_app

replica_store = os.environ.get("CHATLAB_REPLICA_STORE") or f"sqlite:///{workdir / 'replicas.db'}"
replica_a = BackgroundServer(create_app(replica_store), name="replica-a").start()
replica_b = BackgroundServer(create_app(replica_store), name="replica-b").start()
provider_a = chatlab.RemoteChatHistoryProvider(replica_a.url)
provider_b = chatlab.RemoteChatHistoryProvider(replica_b.url)
agent_a = chatlab.create_agent(llm.client, provider_a)
agent_b = chatlab.create_agent(llm.client, provider_b)

# %% tags=["real-llm-varies"]
shared = agent_a.create_session()
print("A:", (await agent_a.run("現在時刻を教えてください", session=shared)).text)
await asyncio.sleep(1)
print("B:", (await agent_b.run("もう一度現在時刻を取得してください", session=shared)).text)
print("A:", (await agent_a.run("最初の時刻からどれくらい経過していますか?", session=shared)).text)
key = provider_a.conversation_key(shared)
print("replica A counts", await provider_a.get_stored_message_count(key), "messages;",
      "replica B counts", await provider_b.get_stored_message_count(key))

# %% [markdown]
# ## Moving the history to another store
#
# A service that outgrows its SQLite file moves to PostgreSQL or Redis with `python -m chatlab migrate --from URL --to URL`
# (docs/operations.md). The same function here copies this notebook's SQLite file into a second one (set
# `CHATLAB_MIGRATION_TARGET` to a `postgresql://` or `redis://` URL to try a server). Each conversation keeps its
# version and times, the copy is verified at the end, and running it again copies nothing.

# %%
from chatlab.operations import migrate

target = os.environ.get("CHATLAB_MIGRATION_TARGET") or f"sqlite:///{workdir / 'migrated.db'}"
print(await migrate(store, target))
print(await migrate(store, target))  # resumable: what is there already is not copied again

moved = start_service(store=target)
async with chatlab.RemoteChatHistoryProvider(moved.url) as moved_provider:
    await chatlab.print_external_store(moved_provider)
moved.stop()

# %% [markdown]
# Stop what this notebook started and remove its files:

# %%
import shutil

for closing in (provider, provider_a, provider_b, llm):
    await closing.aclose()
for server in (replica_a, replica_b, service, llm.offline_server):
    if server is not None:
        server.stop()
shutil.rmtree(workdir)
