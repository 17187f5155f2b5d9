# The article's RemoteChatHistoryProvider, written by notebook 2's %%writefile cells: edit it there.
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from agent_framework import AgentSession, HistoryProvider, Message

from chatlab.client.codec import messages_from_meai, messages_to_meai


@dataclass(frozen=True)
class ChatHistorySummary:
    conversation_key: str  # C#: record ChatHistorySummary(string ConversationKey, int MessageCount)
    message_count: int

class RemoteChatHistoryProvider(HistoryProvider):
    """The session keeps a conversation key; the chat history service keeps the messages."""

    def __init__(self, chat_history_service_url: str | None = None, *, http_client: httpx.AsyncClient | None = None,
                 state_initializer: Callable[[AgentSession | None], dict[str, str]] | None = None,
                 state_key: str | None = None) -> None:
        super().__init__(state_key or "RemoteChatHistoryProvider")  # the state key is the source_id
        self._owns_http_client = http_client is None
        self._http_client = http_client or httpx.AsyncClient(base_url=chat_history_service_url, timeout=60)
        self._state_initializer = state_initializer or (lambda _: {"externalConversationKey": uuid.uuid4().hex})

    @property
    def state_keys(self) -> list[str]:
        return [self.source_id]

    def get_or_initialize_state(self, state: dict[str, Any], session: AgentSession | None = None) -> dict[str, Any]:
        if "externalConversationKey" not in state:  # C#: _sessionState.GetOrInitializeState(session)
            state.update(self._state_initializer(session))
        return state

    def try_get_external_conversation_key(self, session: AgentSession) -> str | None:
        return session.state.get(self.source_id, {}).get("externalConversationKey")

    # (2) before a run: load the history (C#: ProvideChatHistoryAsync)
    async def get_messages(self, session_id: str | AgentSession | None, *, state: dict[str, Any] | None = None,
                           **kwargs: Any) -> list[Message]:
        if isinstance(session_id, AgentSession):  # C#: GetMessagesAsync(session), the helper
            key = self.try_get_external_conversation_key(session_id)
            return await self._get_messages_core(key) if key else []
        print("[ProvideChatHistoryAsync]")
        key = self.get_or_initialize_state(state)["externalConversationKey"]
        print(f"Found messages for ExternalConversationKey: {key}")
        messages = await self._get_messages_core(key)
        print(f"Messages Count: {len(messages)}")
        print(f"First Message: {self.describe(messages[0] if messages else None)}")
        return messages

    async def _get_messages_core(self, external_conversation_key: str) -> list[Message]:
        response = await self._http_client.get(f"chat-history/{external_conversation_key}")
        response.raise_for_status()
        return messages_from_meai(response.json())

    @staticmethod
    def describe(message: Message | None) -> str:
        """`role , [content types]`, for the `First Message: ...` lines."""
        if message is None:
            return " ,"
        return f"{message.role} , [{', '.join(content.type for content in message.contents)}]"

    # (3) after a run: append the request, then the response (C#: StoreChatHistoryAsync)
    async def after_run(self, *, agent: Any, session: AgentSession, context: Any, state: dict[str, Any]) -> None:
        print("[StoreChatHistoryAsync]")
        key = self.get_or_initialize_state(state, session)["externalConversationKey"]
        print(f"Storing messages for ExternalConversationKey: {key}")
        await self.save_messages(session.session_id, context.input_messages, state=state)
        if context.response is not None:
            response_messages = context.response.messages
            print(f"ResponseMessages Count: {len(response_messages)}")
            print(f"First ResponseMessage: {self.describe(response_messages[0] if response_messages else None)}")
            await self.save_messages(session.session_id, response_messages, state=state)

    async def save_messages(self, session_id: str | None, messages: Sequence[Message], *,
                            state: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not messages:  # C#: AppendMessagesAsync, one POST per batch
            return
        key = self.get_or_initialize_state(state)["externalConversationKey"]
        response = await self._http_client.post(f"chat-history/{key}", json={"messages": messages_to_meai(messages)})
        response.raise_for_status()  # C#: EnsureSuccessStatusCode()

    # (4) the helper methods
    async def get_stored_message_count(self, external_conversation_key: str) -> int:
        return len(await self._get_messages_core(external_conversation_key))

    async def set_messages(self, session: AgentSession, messages: Sequence[Message]) -> None:
        key = self.try_get_external_conversation_key(session)
        if key is not None:
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

    async def aclose(self) -> None:
        if self._owns_http_client:  # C#: Dispose()
            await self._http_client.aclose()
