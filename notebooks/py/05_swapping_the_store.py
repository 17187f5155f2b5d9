# %% [markdown]
# # 5. Swapping the store
#
# The article keeps the history in memory and says the store is easy to swap (保存先を差し替えやすい). This notebook
# swaps it. The provider and the agent do not change: they only know the service's URL.
#
# **What you'll learn**
#
# - How to run the service on a SQLite file instead of memory.
# - That a conversation survives a restart of the service, and that the in-memory store forgets it.
# - How two service replicas share one store.
# - How to move the history from one store to another.
#
# **What you'll need**
#
# - Notebooks 1 to 4: the service, the provider and the agent.
# - `chatlab` installed. SQLite comes with Python.
# - An LLM is optional. Without one, the offline tutorial model answers, as in
#   [notebook 3](03_running_the_agent.ipynb).
# - Optional: PostgreSQL or Redis. Install `chatlab[stores]` and set `CHATLAB_REPLICA_STORE` to the store's URL
#   (for example `postgresql://postgres@127.0.0.1:5432/test`). Without it, the replicas share a SQLite file.
#
# Previous: [4. The second run](04_second_run.ipynb) ·
# Next: [6. The protections the article leaves out](06_protections.ipynb)
#
# | store | URL for `start_service(store=URL)` or `python -m chatlab serve --store URL` | survives a restart |
# |---|---|---|
# | in memory (the article's, the default) | `memory://` | no |
# | SQLite | `sqlite:///history.db` | yes |
# | PostgreSQL | `postgresql://user@host:5432/db` | yes, and replicas can share it |
# | Redis | `redis://host:6379/0` | as far as Redis's persistence settings allow; replicas can share it |

# %% [markdown]
# ## Start the service on a SQLite file
#
# The file goes in a temporary folder, deleted when the kernel stops. `started` lists the servers this notebook
# starts, and the last cell stops them. Run this cell again and it first stops the earlier run's servers.

# %%
import os
import tempfile
from pathlib import Path

import chatlab
from chatlab.service import start_service

for server in globals().get("started", []):  # this cell ran before: stop what that run started
    server.stop()
started = []

scratch = tempfile.TemporaryDirectory(prefix="chatlab-05-")
workdir = Path(scratch.name)
store = f"sqlite:///{workdir / 'chat-history.db'}"
service = start_service(store=store)
started.append(service)
print("chat history service:", service.url, "on the SQLite file chat-history.db")

# %% [markdown]
# The LLM connection, as in notebook 3 (`connect_llm` picks your LLM, or the offline model when there is none):

# %%
llm = await chatlab.connect_llm()
if llm.offline_server is not None:  # the offline model runs in this kernel: stop it at the end too
    started.append(llm.offline_server)

# %% [markdown]
# ## The same provider and agent
#
# Nothing on the agent side mentions the store.

# %%
provider = chatlab.RemoteChatHistoryProvider(service.url)
agent = chatlab.create_agent(llm.client, provider)
chatlab.show_provider_calls()

session = await chatlab.create_or_resume_session(agent, provider, None)
chatlab.print_agent_response(await agent.run("現在時刻を教えてください", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# ## Stop the service and start it again
#
# While the service is down, the provider says so: a run would fail rather than lose messages. Then a new service
# starts on the same port and the same file.

# %%
port = service.port
service.stop()
try:
    await provider.get_conversation_summaries()
except chatlab.ChatHistoryServiceError as error:
    print(type(error).__name__, "- the service is down")

service = start_service(port=port, store=store)
started.append(service)
await chatlab.print_external_store(provider)

# %% [markdown]
# The conversation is still there. The session holds only its key, so it simply goes on: 8, then 10 messages.
# The elapsed time is measured from the first answer, given before the restart.

# %%
chatlab.pause(1)  # a second passes between the first time and the next

# %%
chatlab.print_agent_response(await agent.run("もう一度現在時刻を取得してください", session=session))
chatlab.print_agent_response(await agent.run("最初の時刻からどれくらい経過していますか?", session=session))
await chatlab.print_external_store(provider)

# %% [markdown]
# The article's in-memory store forgets everything in the same restart:

# %%
from agent_framework import Message

chatlab.show_provider_calls(False)
memory_service = start_service(store="memory://")
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
# With PostgreSQL or Redis, the service keeps no state of its own. Several replicas can then serve the same
# conversations behind a load balancer. In a terminal:
#
# ```bash
# python -m chatlab serve --port 5001 --store postgresql://postgres@127.0.0.1:5432/test
# python -m chatlab serve --port 5002 --store postgresql://postgres@127.0.0.1:5432/test
# ```
#
# Here both replicas run in background threads, each with its own app and its own connections to the store.

# %%
from chatlab.runner import BackgroundServer
from chatlab.service import create_app

replica_store = os.environ.get("CHATLAB_REPLICA_STORE") or f"sqlite:///{workdir / 'replicas.db'}"
replica_a = BackgroundServer(create_app(replica_store), name="replica-a").start()
replica_b = BackgroundServer(create_app(replica_store), name="replica-b").start()
started += [replica_a, replica_b]
provider_a = chatlab.RemoteChatHistoryProvider(replica_a.url)
provider_b = chatlab.RemoteChatHistoryProvider(replica_b.url)
agent_a = chatlab.create_agent(llm.client, provider_a)
agent_b = chatlab.create_agent(llm.client, provider_b)

# %% [markdown]
# One session, three runs: the first and the third through replica A, the second through replica B.

# %%
shared = agent_a.create_session()
print("A:", (await agent_a.run("現在時刻を教えてください", session=shared)).text)

# %%
chatlab.pause(1)

# %%
print("B:", (await agent_b.run("もう一度現在時刻を取得してください", session=shared)).text)
print("A:", (await agent_a.run("最初の時刻からどれくらい経過していますか?", session=shared)).text)
shared_key = provider_a.conversation_key(shared)
print("replica A counts", await provider_a.get_stored_message_count(shared_key), "messages;",
      "replica B counts", await provider_b.get_stored_message_count(shared_key))

# %% [markdown]
# ## Moving the history to another store
#
# `python -m chatlab migrate --from URL --to URL` moves a service's history to another store
# ([docs/operations.md](../docs/operations.md)). Here the same function copies the SQLite file into a second one.
# Set `CHATLAB_MIGRATION_TARGET` to a PostgreSQL or Redis URL to try a server. The copy is verified, and a second
# run copies nothing.

# %%
from chatlab.operations import migrate

target = os.environ.get("CHATLAB_MIGRATION_TARGET") or f"sqlite:///{workdir / 'migrated.db'}"
print(await migrate(store, target))
print(await migrate(store, target))  # again: what is there already is not copied twice

moved = start_service(store=target)
started.append(moved)
async with chatlab.RemoteChatHistoryProvider(moved.url) as moved_provider:
    await chatlab.print_external_store(moved_provider)

# %% [markdown]
# ## Stop what this notebook started
#
# The clients close and every server in `started` stops. The SQLite files stay until the kernel stops: the
# exercise below reads one of them.

# %%
for client in (provider, provider_a, provider_b, llm):
    await client.aclose()
for server in started:
    server.stop()

# %% [markdown]
# ## Recap
#
# - The store is a setting of the service (`--store URL`). The provider and the agent never change.
# - SQLite, PostgreSQL and Redis keep the history across a restart. Memory does not.
# - With PostgreSQL or Redis, several replicas serve the same conversations.
# - `python -m chatlab migrate` moves the history between stores, verified and resumable.

# %% [markdown]
# ## On your own: read the store without the service
#
# The service is only a door to the store: the history lives in the file. The service is stopped now, yet the file
# still holds the first session's conversation.
#
# Write `count_in_store(store_url, key)`. It opens the store with `chatlab.stores.open_store(store_url)`, reads the
# conversation with the store's `get(key)` (a list of messages), closes the store with `close()`, and returns how
# many messages it read. `get` and `close` are async: `await` them.
#
# Write it in the next cell, in place of the line that loads the reference solution
# (`notebooks/solutions/ex05_count_in_store.py`). Then run the check.

# %%
from solutions.ex05_count_in_store import count_in_store  # replace with your own function

# %% tags=["exercise-check"]
counted = await count_in_store(store, provider.conversation_key(session))
assert isinstance(counted, int), f"count_in_store should return a number of messages (an int), not {counted!r}"
assert counted == 10, (
    f"count_in_store found {counted} messages, but the SQLite file holds 10 for the first session's key. "
    "Open the store from the URL you are given (not a new memory:// store) and count what get(key) returns."
)
print("Well done: the file holds all 10 messages, with no service running.")
