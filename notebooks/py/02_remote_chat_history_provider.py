# %% [markdown]
# # 2. The RemoteChatHistoryProvider
#
# **What this shows.** The article's section 3 (RemoteChatHistoryProviderの実装): a history provider that holds no
# history itself. It keeps one conversation key in the agent session's state and reads and appends the history through
# the chat history service of notebook 1. This notebook writes the article's `RemoteChatHistoryProvider.cs` in Python,
# in one cell, as a subclass of the framework's `HistoryProvider`, and calls each part by hand against the service:
# (1) the constructor and the session state, (2) the load hook, (3) the store hook, (4) the helper methods of the
# article's table. Then it introduces `chatlab.RemoteChatHistoryProvider`, the package's version of the same contract.
#
# **What it needs.** `chatlab` installed. No LLM (the agent comes in notebook 3). It starts the service in the
# background, or uses `CHAT_HISTORY_SERVICE_URL` if set.
#
# Previous: [1. The chat history service](01_chat_history_service.ipynb) ·
# Next: [3. Running the agent](03_running_the_agent.ipynb)

# %%
from chatlab.service import ensure_service

service = ensure_service()

# %% [markdown]
# ## From C# to Python
#
# | the article (C#, .NET Agent Framework) | here (Python Agent Framework) |
# |---|---|
# | `class RemoteChatHistoryProvider : ChatHistoryProvider` | `class RemoteChatHistoryProvider(HistoryProvider)` |
# | `ProviderSessionState<State>`, kept in `session.StateBag` under a state key | a plain dict, `session.state[source_id]`; the framework hands it to the hooks as `state` |
# | `ProvideChatHistoryAsync(InvokingContext)`, before each run | `get_messages(session_id, state=...)`, called by the base class's `before_run` |
# | `StoreChatHistoryAsync(InvokedContext)`, after each run: `RequestMessages`, `ResponseMessages` | `after_run(..., context, state)`: `context.input_messages`, `context.response.messages`; `save_messages` persists a list |
# | `HttpClient` with `GetFromJsonAsync`, `PostAsJsonAsync`, `PutAsJsonAsync` | `httpx.AsyncClient` (`await` in a notebook cell blocks nothing) |
# | `ChatMessage` <-> JSON by System.Text.Json | `Message` <-> the same JSON by `chatlab.client.codec` (`messages_to_meai`, `messages_from_meai`) |
#
# The framework's `Message` is not .NET's `ChatMessage`, so something must turn one into the other's JSON: the wire
# format of the service is the article's (`{"role": ..., "contents": [{"$type": "text", ...}]}`), and
# `chatlab.client.codec` converts both ways without losing anything. The class below uses it and nothing else of chatlab.
#
# ## The article's provider, in Python
#
# - **(1) Constructor and state.** The C# constructor keeps an `HttpClient` (its own, or yours) and a
#   `ProviderSessionState<State>` whose initializer makes `new State(Guid.NewGuid().ToString("N"))` and whose key is
#   `nameof(RemoteChatHistoryProvider)`. In Python the state key is the provider's `source_id`: the framework keeps the
#   provider's state in `session.state[source_id]` and passes that dict to the hooks. `get_or_initialize_state` fills in
#   `{"externalConversationKey": "<32 hex digits>"}` on first use. `StateKeys` lists the keys it uses.
# - **(2) `ProvideChatHistoryAsync`** reads the state's key and `GET`s `/chat-history/{key}`; what it returns is the
#   conversation the model sees. In Python that is `get_messages`, which the base class's `before_run` calls.
# - **(3) `StoreChatHistoryAsync`** appends the request messages, then the response messages, each with a `POST`
#   (`AppendMessagesAsync`), then saves the state. Python's `HistoryProvider` splits this hook in two: `after_run` sees
#   the run (like `InvokedContext`) and `save_messages` persists a list. Its default `after_run` joins request and
#   response into one list; the article sends them separately, so this class overrides `after_run` to do what the
#   article does, and `save_messages` is `AppendMessagesAsync`. There is no `SaveState`: `state` *is* the dict in
#   `session.state`, changed in place.
# - **(4) The helper methods** of the article's table: `TryGetExternalConversationKey`, `GetStoredMessageCountAsync`,
#   `GetMessagesAsync`, `SetMessagesAsync` (`PUT`), `GetConversationSummariesAsync`, `SessionExistsAsync`,
#   `AttachToSession`, and `Dispose` (`aclose` here). `GetMessagesAsync(session)` shares its Python name with the load
#   hook (the base class already calls that one `get_messages`), so `get_messages` does both: given a session it is the
#   article's helper.
#
# The `print` calls are the article's `Console.WriteLine` lines.

# %% tags=["article-provider"]
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from agent_framework import AgentSession, HistoryProvider, Message

from chatlab.client.codec import messages_from_meai, messages_to_meai


@dataclass(frozen=True)
class ChatHistorySummary:
    """C#: record ChatHistorySummary(string ConversationKey, int MessageCount)."""

    conversation_key: str
    message_count: int


def describe(message: Message | None) -> str:
    """`role , [content types]`, for the article's `First Message: ...` lines."""
    if message is None:
        return " ,"
    return f"{message.role} , [{', '.join(content.type for content in message.contents)}]"


class RemoteChatHistoryProvider(HistoryProvider):
    """The article's provider: the session keeps a conversation key, the chat history service the messages."""

    # (1) the constructor and the session state
    def __init__(
        self,
        chat_history_service_url: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        state_initializer: Callable[[AgentSession | None], dict[str, str]] | None = None,
        state_key: str | None = None,
    ) -> None:
        super().__init__(state_key or "RemoteChatHistoryProvider")  # the state key is the provider's source_id
        self._owns_http_client = http_client is None
        self._http_client = http_client or httpx.AsyncClient(base_url=chat_history_service_url, timeout=60)
        self._state_initializer = state_initializer or (lambda _: {"externalConversationKey": uuid.uuid4().hex})

    @property
    def state_keys(self) -> list[str]:
        return [self.source_id]

    def get_or_initialize_state(self, state: dict[str, Any], session: AgentSession | None = None) -> dict[str, Any]:
        """C#: _sessionState.GetOrInitializeState(session)."""
        if "externalConversationKey" not in state:
            state.update(self._state_initializer(session))
        return state

    # (2) before a run: load the history (C#: ProvideChatHistoryAsync)
    async def get_messages(
        self, session_id: str | AgentSession | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        if isinstance(session_id, AgentSession):  # C#: GetMessagesAsync(session), the helper
            key = self.try_get_external_conversation_key(session_id)
            return await self._get_messages_core(key) if key else []
        print("[ProvideChatHistoryAsync]")
        key = self.get_or_initialize_state(state)["externalConversationKey"]
        print(f"Found messages for ExternalConversationKey: {key}")
        messages = await self._get_messages_core(key)
        print(f"Messages Count: {len(messages)}")
        print(f"First Message: {describe(messages[0] if messages else None)}")
        return messages

    # (3) after a run: append the request, then the response (C#: StoreChatHistoryAsync)
    async def after_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        print("[StoreChatHistoryAsync]")
        key = self.get_or_initialize_state(state, session)["externalConversationKey"]
        print(f"Storing messages for ExternalConversationKey: {key}")
        await self.save_messages(session.session_id, context.input_messages, state=state)
        if context.response is not None:
            response_messages = context.response.messages
            print(f"ResponseMessages Count: {len(response_messages)}")
            print(f"First ResponseMessage: {describe(response_messages[0] if response_messages else None)}")
            await self.save_messages(session.session_id, response_messages, state=state)

    async def save_messages(
        self, session_id: str | None, messages: Sequence[Message], *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """C#: AppendMessagesAsync: one POST per non-empty batch."""
        if not messages:
            return
        key = self.get_or_initialize_state(state)["externalConversationKey"]
        response = await self._http_client.post(f"chat-history/{key}", json={"messages": messages_to_meai(messages)})
        response.raise_for_status()  # C#: EnsureSuccessStatusCode()

    # (4) the helper methods
    def try_get_external_conversation_key(self, session: AgentSession) -> str | None:
        """C#: bool TryGetExternalConversationKey(session, out string key); None when the session has no key."""
        return session.state.get(self.source_id, {}).get("externalConversationKey")

    async def get_stored_message_count(self, external_conversation_key: str) -> int:
        return len(await self._get_messages_core(external_conversation_key))

    async def set_messages(self, session: AgentSession, messages: Sequence[Message]) -> None:
        key = self.try_get_external_conversation_key(session)
        if key is None:
            return
        response = await self._http_client.put(f"chat-history/{key}", json={"messages": messages_to_meai(messages)})
        response.raise_for_status()

    async def get_conversation_summaries(self) -> list[ChatHistorySummary]:
        response = await self._http_client.get("chat-history")
        response.raise_for_status()
        return [ChatHistorySummary(item["conversationKey"], item["messageCount"]) for item in response.json()]

    async def session_exists(self, session_id: str) -> bool:
        if not session_id or not session_id.strip():
            raise ValueError("session_id must not be empty")  # C#: ArgumentException.ThrowIfNullOrWhiteSpace
        return any(summary.conversation_key == session_id for summary in await self.get_conversation_summaries())

    def attach_to_session(self, session: AgentSession, session_id: str) -> None:
        if not session_id or not session_id.strip():
            raise ValueError("session_id must not be empty")
        session.state[self.source_id] = {"externalConversationKey": session_id}

    async def _get_messages_core(self, external_conversation_key: str) -> list[Message]:
        response = await self._http_client.get(f"chat-history/{external_conversation_key}")
        response.raise_for_status()
        return messages_from_meai(response.json())

    async def aclose(self) -> None:
        """C#: Dispose(): close the HTTP client if this provider made it."""
        if self._owns_http_client:
            await self._http_client.aclose()


# %% [markdown]
# ## (1) The session and its external conversation key
#
# A new session has no state for the provider yet. The framework passes each hook `session.state.setdefault(source_id,
# {})`; the first hook that runs fills it in.

# %%
provider = RemoteChatHistoryProvider(service.url)
session = AgentSession()
print("StateKeys:", provider.state_keys)
print("key before the first run:", provider.try_get_external_conversation_key(session))
state = session.state.setdefault(provider.source_id, {})  # what the framework hands the hooks
provider.get_or_initialize_state(state)
print("key after:", provider.try_get_external_conversation_key(session))
session.state

# %% [markdown]
# Because the state is plain JSON, the whole session serializes with `to_dict()` (C#: `StateBag.Serialize()`), and any
# process that restores it with `AgentSession.from_dict()` reads and continues the same conversation. The framework's
# own `session_id` is a different, unrelated id: the provider never uses it; only `externalConversationKey` finds the
# conversation on the service.

# %%
import json

print(json.dumps(session.to_dict(), ensure_ascii=False))

# %% [markdown]
# ## (2) Before a run: load the history (`GET`)
#
# This is what the framework's `before_run` does before each run: call `get_messages` with the provider's state. The
# conversation is new, so the service has nothing for it.

# %%
history = await provider.get_messages(session.session_id, state=state)
history

# %% [markdown]
# **`First Message: user , [text]`.** The C# line prints `{message.Contents}`, a `List<AIContent>`, and .NET formats a
# list by its type name: ``System.Collections.Generic.List`1[Microsoft.Extensions.AI.AIContent]``, which says nothing
# about the message. The Python line prints the types of the message's contents instead: `[text]` for a text message,
# `[function_call]` for a tool call. With no message both print `First Message:  ,`.
#
# ## (3) After a run: append the request, then the response (`POST`)
#
# After a run the framework calls `after_run`, which appends the run's request messages and then its response messages.
# Here are the four messages of a run that used the `GetDateTime` tool, appended as `after_run` appends them (the agent
# runs them for real in notebook 3):

# %%
from agent_framework import Content

request = [Message("user", ["現在時刻を教えてください"])]
response = [
    Message("assistant", [Content.from_function_call("call_1", "GetDateTime", arguments={})], author_name="SampleAgent"),
    Message("tool", [Content.from_function_result("call_1", result="2026-04-16 01:30:52")]),
    Message("assistant", ["現在の日時は **2026-04-16 01:30:52** です。"], author_name="SampleAgent"),
]
await provider.save_messages(session.session_id, request, state=state)  # C#: context.RequestMessages
await provider.save_messages(session.session_id, response, state=state)  # C#: context.ResponseMessages
history = await provider.get_messages(session.session_id, state=state)  # the next run's load

# %% [markdown]
# On the wire, each `Message` is the article's Microsoft.Extensions.AI `ChatMessage` JSON, made by
# `chatlab.client.codec`. What the Python framework has and .NET has no field for travels in `additionalProperties` and
# comes back, so nothing is lost either way:

# %%
print(json.dumps(messages_to_meai(response[:1]), ensure_ascii=False, indent=2))

# %% [markdown]
# The article's `Program.cs` shows messages with two small helpers, `FormatContent` and `PrintMessages`: a text content
# as `TextContent: <text>`, any other content by its C# type name.

# %%
CSHARP_CONTENT_NAMES = {"text": "TextContent", "function_call": "FunctionCallContent",
                        "function_result": "FunctionResultContent"}


def format_content(content: Content) -> str:
    """C#: FormatContent(object content)."""
    name = CSHARP_CONTENT_NAMES.get(content.type, content.type)
    return f"{name}: {content.text}" if content.type == "text" else name


def print_messages(messages: Sequence[Message]) -> None:
    """C#: PrintMessages(IEnumerable<ChatMessage> messages)."""
    for message in messages:
        print(f"Role: {message.role}, Contents: {', '.join(format_content(c) for c in message.contents)}")


print_messages(history)

# %% [markdown]
# ## (4) The rest of the article's methods
#
# | C# (article) | Python | what it does | required |
# |---|---|---|---|
# | `ProvideChatHistoryAsync` | `get_messages(session_id, state=...)`, called by `before_run` | load the history before a run | ✓ |
# | `StoreChatHistoryAsync` | `after_run` -> `save_messages` | append request, then response, after a run | ✓ |
# | `StateKeys` | `state_keys` | the keys the provider uses in the session state | ✓ |
# | `TryGetExternalConversationKey` | `try_get_external_conversation_key(session)` | the session's key, or `None` | |
# | `GetMessagesAsync` | `await get_messages(session)` | a session's stored messages | |
# | `SetMessagesAsync` | `await set_messages(session, messages)` | replace a session's stored messages | |
# | `GetConversationSummariesAsync` | `await get_conversation_summaries()` | the conversations on the service and their counts | |
# | `SessionExistsAsync` | `await session_exists(key)` | does the service hold this conversation? | |
# | `AttachToSession` | `attach_to_session(session, key)` | point a session at an existing conversation | |
# | `Dispose` | `await aclose()` | close the HTTP client the provider created | |

# %%
key = provider.try_get_external_conversation_key(session)
for summary in await provider.get_conversation_summaries():
    print(summary)
print("exists:", await provider.session_exists(key))
print("exists (a new key):", await provider.session_exists(uuid.uuid4().hex))

# %% [markdown]
# `attach_to_session` is how another session, or another process, picks up a conversation by its key:

# %%
other = AgentSession()
provider.attach_to_session(other, key)
print(other.state)
print_messages(await provider.get_messages(other))

# %% [markdown]
# `set_messages` replaces the whole history (`PUT`), for example to keep only the question:

# %%
await provider.set_messages(other, request)
print("Messages Count:", await provider.get_stored_message_count(key))

# %% [markdown]
# ## `chatlab.RemoteChatHistoryProvider`: the same contract, and what the article leaves out
#
# The package's provider keeps the same state (`{"externalConversationKey": ...}` under
# `RemoteChatHistoryProvider`), has the same hooks and helper methods, and talks to the same service in the same JSON, so either
# provider reads what the other wrote. What it adds, one line each:
#
# - **Incremental reads:** it keeps what it loaded per conversation and asks only for what is new
#   (`GET /chat-history/{key}?after=N`, checked against the conversation's `ETag`), where the article downloads the whole
#   conversation before every run.
# - **One append per run:** request and response go in one `POST`, so a failure stores neither half.
# - **Retries with idempotency:** a request that gets no answer, a `429` or a `502`-`504` is retried with backoff, and
#   each append carries an `Idempotency-Key` kept across its retries, so a retried append is stored once.
# - **Windowing:** `max_history_messages=` / `max_history_tokens=` hand the model only the newest messages, never a tool
#   call without its result; the service keeps them all.
# - **Errors that say what to do**, API keys and TLS for a protected service ([notebook 6](06_protections.ipynb)), and
#   time-ordered keys (UUID version 7, [notebook 1](01_chat_history_service.ipynb)).
#
# The conversation written above by the notebook's provider, read by chatlab's:

# %%
import chatlab

async with chatlab.RemoteChatHistoryProvider(service.url) as packaged:
    print(packaged.state_keys, packaged.try_get_external_conversation_key(other) == key)
    read_back = await packaged.get_messages(other)
print("the same messages:", [m.to_dict() for m in read_back] == [m.to_dict() for m in request])

# %% [markdown]
# ## When the service is not there
#
# The article's provider calls `EnsureSuccessStatusCode` and lets the exception fly, and so does the class above
# (`raise_for_status`, or httpx's `ConnectError`). chatlab's raises its own `ChatHistoryServiceError` subclasses, which
# name the URL, what went wrong and what to do:

# %%
import socket

with socket.socket() as probe:  # a port where nothing listens
    probe.bind(("127.0.0.1", 0))
    closed_url = f"http://127.0.0.1:{probe.getsockname()[1]}"

async with chatlab.RemoteChatHistoryProvider(closed_url) as nowhere:
    try:
        await nowhere.get_conversation_summaries()
    except chatlab.ChatHistoryServiceError as error:
        print(type(error).__name__)
        print(error)


# %% [markdown]
# Stop what this notebook started:

# %%
await provider.aclose()
service.stop()
