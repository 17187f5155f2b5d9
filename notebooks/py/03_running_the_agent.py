# %% [markdown]
# # 3. Running the agent
#
# **What this shows.** The article's sections 4 and 5 (動作確認, 実行結果): the `GetDateTime` tool, the connection
# settings, `SampleAgent` with the `RemoteChatHistoryProvider`, the `Program.cs` helpers that print what happens, two
# sessions, the store's contents after every run, and what each session's state holds. Session 1 grows to 4, 8 and 10
# messages; session 2 is separate with 4. At the end the same scenario runs with the article's provider written in
# [notebook 2](02_remote_chat_history_provider.ipynb) and with chatlab's, side by side.
#
# **What it needs.** `chatlab` installed. An LLM is optional: LM Studio at `http://localhost:1234/v1` with
# `openai/gpt-oss-20b` (the article's setup) or any OpenAI-compatible endpoint set with `OPENAI_BASE_URL`,
# `OPENAI_CHAT_COMPLETION_MODEL` and `OPENAI_API_KEY`. When none answers, the **offline tutorial model** is used, and
# the cell that connects says so. The committed outputs come from the offline model; cells whose output a real LLM
# changes are tagged `real-llm-varies`.
#
# Previous: [2. The RemoteChatHistoryProvider](02_remote_chat_history_provider.ipynb) ·
# Next: [4. The second run](04_second_run.ipynb)

# %%
import asyncio

import chatlab
from chatlab.service import ensure_service

service = ensure_service()

# %% [markdown]
# ## The tool
#
# The article's tool is a static C# method with two attributes: `[DisplayName("GetDateTime")]` names it for the model
# and `[Description("現在の日時を取得します。")]` tells the model what it does; `AIFunctionFactory.Create(GetDateTime)`
# turns it into a tool. In Python the framework's `@tool(name=..., description=...)` decorator does both. It returns the
# local time as C#'s `DateTime.Now.ToString("yyyy-MM-dd HH:mm:ss")` does.

# %%
from datetime import datetime

from agent_framework import tool


@tool(name="GetDateTime", description="現在の日時を取得します。")
def GetDateTime() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


print(GetDateTime.name, "-", GetDateTime.description)
print(GetDateTime.func())

# %% [markdown]
# ## The connection settings
#
# The article connects to LM Studio with an OpenAI client (`http://localhost:1234/v1`, `openai/gpt-oss-20b`, a dummy
# key) and turns it into an `IChatClient`. `connect_llm()` makes the framework's `OpenAIChatCompletionClient` with the
# same defaults (Chat Completions: the Responses client would keep a second copy of the history on the LLM's server) and
# prints which LLM is in use. `CHATLAB_LLM=offline` forces the offline model; `CHATLAB_LLM=endpoint` refuses to fall
# back.

# %% tags=["real-llm-varies"]
llm = await chatlab.connect_llm()


# %% [markdown]
# ## The provider and the agent
#
# The article reads `CHAT_HISTORY_SERVICE_URL` (default `http://localhost:5000`) and creates its provider there; here the
# URL is the service started above (which honours `CHAT_HISTORY_SERVICE_URL` too). The provider is
# `chatlab.RemoteChatHistoryProvider`, the package's version of the class written in notebook 2.
#
# The article builds the agent with `chatClient.AsAIAgent(new ChatClientAgentOptions { ... })`. In Python the options
# are keyword arguments of `as_agent`: `Name` is `name`, `ChatOptions.Instructions` is `instructions`,
# `ChatOptions.Tools` is `tools`, `ChatOptions.MaxOutputTokens = 5000` is `default_options={"max_tokens": 5000}` (sent
# as `max_completion_tokens`), `Description` is `description`, and `ChatHistoryProvider = chatHistoryProvider` is
# `context_providers=[provider]`: a history provider is one kind of context provider. `create_agent` is a function
# because the comparison at the end builds a second agent (`chatlab.create_agent` is the same function, in the package).

# %%
def create_agent(chat_history_provider):
    """C#: chatClient.AsAIAgent(new ChatClientAgentOptions { ... })."""
    return llm.client.as_agent(
        name="SampleAgent",
        instructions="ユーザーの質問に対して適切なツールを使用して回答してください。日時は必ず{{GetDateTime}}で最新の情報を取得してください",
        tools=[GetDateTime],
        default_options={"max_tokens": 5000},
        description="このAI Agentは日時に関する情報を提供します。",
        context_providers=[chat_history_provider],
    )


provider = chatlab.RemoteChatHistoryProvider(service.url)
agent = create_agent(provider)
print(agent.name, "-", agent.description)


# %% [markdown]
# ## Two sessions, and the first `Program.cs` helpers
#
# The article's `Program.cs` defines a few helpers that print what happens. The first two are used right away:
# `CreateOrResumeSessionAsync` makes a session, or attaches it to a conversation the service already holds when given a
# key (used in notebook 4); `PrintExternalStoreAsync` lists every conversation on the service with its message count.
# They print the same lines as `chatlab.tutorial.display`'s functions of the same names, which the later notebooks use.
# `agent.create_session()` is C#'s `CreateSessionAsync()`; in Python it is not asynchronous.

# %%
async def create_or_resume_session(agent, chat_history_provider, session_id):
    """C#: CreateOrResumeSessionAsync(agent, chatHistoryProvider, sessionId)."""
    session = agent.create_session()
    if session_id is None or not session_id.strip():
        print("[Session] 新しいセッションを開始します。")
        return session
    if not await chat_history_provider.session_exists(session_id):
        print(f"[Session] セッションID '{session_id}' は見つからなかったため、新しいセッションを開始します。")
        return session
    chat_history_provider.attach_to_session(session, session_id)
    print(f"[Session] セッションID '{session_id}' を再開しました。")
    return session


async def print_external_store(chat_history_provider):
    """C#: PrintExternalStoreAsync(chatHistoryProvider)."""
    print("[External Store]")
    for summary in await chat_history_provider.get_conversation_summaries():
        print(f"External Store Key: {summary.conversation_key}, Messages Count: {summary.message_count}")


# %% [markdown]
# `show_provider_calls()` turns on chatlab's provider's log lines, the article's `Console.WriteLine` calls.

# %%
chatlab.show_provider_calls()
session1 = await create_or_resume_session(agent, provider, None)
session2 = agent.create_session()
await print_external_store(provider)


# %% [markdown]
# ## Session 1: "what time is it?"
#
# A run that calls the tool stores 4 messages: the request, then 3 response messages (the assistant's tool call, the
# tool's result, the assistant's answer). `PrintSessionId` prints the session's conversation key:

# %% tags=["real-llm-varies"]
def print_session_id(session_name, chat_history_provider, session):
    """C#: PrintSessionId(sessionName, chatHistoryProvider, session)."""
    session_id = chat_history_provider.try_get_external_conversation_key(session)
    if session_id is not None:
        print(f"[{session_name}] SessionId: {session_id}")


response = await agent.run("現在時刻を教えてください", session=session1)
print("[Response]")
print(response)
print_session_id("Session1", provider, session1)
await print_external_store(provider)

# %% [markdown]
# **`SessionId` is the conversation key.** What the article prints as `[Session1] SessionId: ...` is not an id of the
# `AgentSession` object but the `externalConversationKey` in its state, the key the service files the conversation
# under (the article: "いずれもチャット履歴管理サーバー上の会話を識別するキーとして読めば問題ありません"). The Python
# framework's `AgentSession` also has a `session_id` of its own, a UUID made by `create_session()` and written by
# `session.to_dict()` as `"session_id"`. The provider never uses that one: a session restored with
# `AgentSession.from_dict()` keeps both, and a session attached to a conversation by key (as in notebook 4) gets a new
# `session_id` but the old conversation key. Only the key finds the history.

# %%
print("SessionId (the conversation key):", provider.try_get_external_conversation_key(session1))
print("session.to_dict()['session_id'] (the framework's id, not used by the provider):", session1.to_dict()["session_id"])

# %% [markdown]
# The article waits 10 seconds, then asks again:

# %% tags=["real-llm-varies"]
await asyncio.sleep(10)
response = await agent.run("もう一度現在時刻を取得してください", session=session1)
print("[Response]")
print(response)
await print_external_store(provider)

# %% [markdown]
# **`First Message: user , [text]`**: the C# program prints the message's `Contents` list here, and .NET formats a list
# by its type name (``System.Collections.Generic.List`1[Microsoft.Extensions.AI.AIContent]``); the Python provider prints
# the types of the contents instead (notebook 2).
#
# ## "How long since the first time?"
#
# No tool is needed: the answer is in the history the provider loaded (8 messages, holding both tool results). The run
# adds 2 messages, the request and the answer. If the provider loaded nothing, the model could not answer this.

# %% tags=["real-llm-varies"]
response = await agent.run("最初の時刻からどれくらい経過していますか?", session=session1)
print("[Response]")
print(response)
await print_external_store(provider)

# %% [markdown]
# ## Session 2: a separate conversation
#
# A new session gets a new key, so its history is kept apart.

# %% tags=["real-llm-varies"]
response2 = await agent.run("現在時刻を教えてください", session=session2)
print("[Response]")
print(response2)
print_session_id("Session2", provider, session2)
await print_external_store(provider)

# %% [markdown]
# ## What the sessions hold
#
# `PrintStateBag` prints what a session keeps: C#'s `session.StateBag.Serialize()` is the `"state"` of Python's
# `session.to_dict()`, and `ValueKind` is the kind .NET gives a JSON value (`Object` for a JSON object). Each session's
# state holds only the key, never the history:

# %%
import json


def print_state_bag(session):
    """C#: PrintStateBag(session)."""
    state_bag = session.to_dict()["state"]
    print(f"stateBagCount:{len(state_bag)}")
    for key, value in state_bag.items():
        value_kind = {dict: "Object", list: "Array", str: "String"}.get(type(value), type(value).__name__)
        print(f"stateBag Key: {key}, ValueKind: {value_kind}, Value: {json.dumps(value, separators=(',', ':'))}")


print("[Session1]")
print_state_bag(session1)
print("[Session2]")
print_state_bag(session2)

# %% [markdown]
# ## What the store holds
#
# Loading before the run and storing after it leave this flow in the store: user -> assistant (tool call) -> tool ->
# assistant, twice, then user -> assistant (`print_messages` is the article's `PrintMessages`, written in notebook 2).

# %% tags=["real-llm-varies"]
chatlab.show_provider_calls(False)
chatlab.print_messages(await provider.get_messages(session1))

# %% [markdown]
# ## The article's provider and chatlab's, side by side
#
# The provider class written in notebook 2 is the article's; `chatlab.RemoteChatHistoryProvider` is the package's. On
# the article's run they must store the same: the next cells run the scenario (both sessions, the article's four
# prompts, no wait) once with each, against the same service, and print, after every run, how many messages the
# session's conversation holds, then the shape of each session's state (the key replaced by `<32 hex>`). The class is
# taken from notebook 2 itself: its cell tagged `article-provider` is executed here (a test of the package does the
# same). The providers' own lines are captured, not shown.

# %%
import contextlib
import io
import re

import nbformat

article_namespace: dict = {}
for cell in nbformat.read("02_remote_chat_history_provider.ipynb", as_version=4).cells:
    if "article-provider" in cell.metadata.get("tags", []):
        exec(cell.source, article_namespace)
ArticleRemoteChatHistoryProvider = article_namespace["RemoteChatHistoryProvider"]
print("from notebook 2:", ArticleRemoteChatHistoryProvider.__name__, "- a subclass of", ArticleRemoteChatHistoryProvider.__base__.__name__)

# %%
SCENARIO = [("Session1", "現在時刻を教えてください"), ("Session1", "もう一度現在時刻を取得してください"),
            ("Session1", "最初の時刻からどれくらい経過していますか?"), ("Session2", "現在時刻を教えてください")]


async def run_scenario(chat_history_provider):
    """The article's runs; the session's stored count after each, and each session's state with its key masked."""
    agent = create_agent(chat_history_provider)
    sessions = {"Session1": agent.create_session(), "Session2": agent.create_session()}
    counts = []
    with contextlib.redirect_stdout(io.StringIO()):  # the providers' printed lines
        for name, prompt in SCENARIO:
            await agent.run(prompt, session=sessions[name])
            key = chat_history_provider.try_get_external_conversation_key(sessions[name])
            stored = {s.conversation_key: s.message_count for s in await chat_history_provider.get_conversation_summaries()}
            counts.append(stored.get(key, 0))
    states = {name: re.sub(r"[0-9a-f]{32}", "<32 hex>", json.dumps(s.to_dict()["state"], separators=(",", ":")))
              for name, s in sessions.items()}
    return counts, states


article_provider = ArticleRemoteChatHistoryProvider(service.url)
article_counts, article_states = await run_scenario(article_provider)
async with chatlab.RemoteChatHistoryProvider(service.url) as packaged_provider:
    chatlab_counts, chatlab_states = await run_scenario(packaged_provider)
print("stored after the run:  notebook 2  chatlab")
for (name, prompt), mine, theirs in zip(SCENARIO, article_counts, chatlab_counts):
    print(f"{mine:>33} {theirs:>8}   {name}: {prompt}")
for name in article_states:
    print(f"{name} state, notebook 2: {article_states[name]}")
    print(f"{name} state, chatlab:    {chatlab_states[name]}")
print("same counts:", article_counts == chatlab_counts, "| same state shape:", article_states == chatlab_states)

# %% [markdown]
# ## What differs from the C# article
#
# - `await agent.run(text, session=session)` is `RunAsync`; `agent.create_session()` is `CreateSessionAsync` and is not
#   asynchronous in Python.
# - The Python framework calls the provider's hooks once per run, as the C# one does. The article's provider (and the
#   class of notebook 2) appends the request and the response in two `POST`s; chatlab's provider sends one.
# - The article's model (gpt-oss-20b) formats its own answers, so their wording differs from run to run; the offline
#   tutorial model always answers the same way, which is what lets these outputs be checked in CI.
#
# Stop what this notebook started:

# %%
await article_provider.aclose()
await provider.aclose()
await llm.aclose()
if llm.offline_server is not None:
    llm.offline_server.stop()
service.stop()
