"""chatlab: out-of-process chat history for Microsoft Agent Framework agents.

The names below are imported on first use (PEP 562), so ``import chatlab`` stays light and
has no side effects; a type checker reads the ``TYPE_CHECKING`` imports and sees the real types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .client.codec import (
        content_from_meai,
        content_to_meai,
        message_from_meai,
        message_to_meai,
        messages_from_meai,
        messages_to_meai,
    )
    from .client.compaction import Compaction
    from .client.errors import (
        ChatHistoryCodecError,
        ChatHistoryServiceConflict,
        ChatHistoryServiceError,
        ChatHistoryServiceProtocolError,
        ChatHistoryServiceStatusError,
        ChatHistoryServiceUnavailable,
        ChatlabError,
        LLMUnavailableError,
    )
    from .client.http import AsyncChatHistoryClient, ChatHistoryClient
    from .client.operations import MessagesPage, SummariesPage
    from .client.provider import ChatHistorySummary, RemoteChatHistoryProvider, service_url, show_provider_calls
    from .client.retry import RetryPolicy
    from .service import ServiceSettings, ensure_service, start_service
    from .stores import open_store
    from .tutorial.agent import create_agent
    from .tutorial.demo import run_demo
    from .tutorial.display import (
        create_or_resume_session,
        print_agent_response,
        print_external_store,
        print_messages,
        print_session_id,
        print_state_bag,
    )
    from .tutorial.llm import LLMConnection, connect_llm
    from .tutorial.offline_model import start_offline_model
    from .tutorial.pause import pause
    from .tutorial.tools import GetDateTime
    from .vocabulary import ConversationSummary, Version

# name -> the module that defines it (tests/test_public_api.py checks this matches the imports above)
_LAZY = {
    "RemoteChatHistoryProvider": "client.provider",
    "Compaction": "client.compaction",
    "AsyncChatHistoryClient": "client.http",
    "ChatHistoryClient": "client.http",
    "MessagesPage": "client.operations",
    "SummariesPage": "client.operations",
    "ChatHistoryServiceConflict": "client.errors",
    "ChatHistoryServiceProtocolError": "client.errors",
    "ChatHistorySummary": "client.provider",
    "show_provider_calls": "client.provider",
    "service_url": "client.provider",
    "message_to_meai": "client.codec",
    "message_from_meai": "client.codec",
    "messages_to_meai": "client.codec",
    "messages_from_meai": "client.codec",
    "content_to_meai": "client.codec",
    "content_from_meai": "client.codec",
    "ChatlabError": "client.errors",
    "ChatHistoryServiceError": "client.errors",
    "ChatHistoryServiceUnavailable": "client.errors",
    "ChatHistoryServiceStatusError": "client.errors",
    "ChatHistoryCodecError": "client.errors",
    "LLMUnavailableError": "client.errors",
    "RetryPolicy": "client.retry",
    "ServiceSettings": "service",
    "start_service": "service",
    "ensure_service": "service",
    "open_store": "stores",
    "ConversationSummary": "vocabulary",
    "Version": "vocabulary",
    "LLMConnection": "tutorial.llm",
    "connect_llm": "tutorial.llm",
    "start_offline_model": "tutorial.offline_model",
    "pause": "tutorial.pause",
    "GetDateTime": "tutorial.tools",
    "create_agent": "tutorial.agent",
    "print_external_store": "tutorial.display",
    "print_session_id": "tutorial.display",
    "print_state_bag": "tutorial.display",
    "print_agent_response": "tutorial.display",
    "print_messages": "tutorial.display",
    "create_or_resume_session": "tutorial.display",
    "run_demo": "tutorial.demo",
}

__all__ = [
    "AsyncChatHistoryClient",
    "ChatHistoryClient",
    "ChatHistoryCodecError",
    "ChatHistoryServiceConflict",
    "ChatHistoryServiceError",
    "ChatHistoryServiceProtocolError",
    "ChatHistoryServiceStatusError",
    "ChatHistoryServiceUnavailable",
    "ChatHistorySummary",
    "ChatlabError",
    "Compaction",
    "ConversationSummary",
    "GetDateTime",
    "LLMConnection",
    "LLMUnavailableError",
    "MessagesPage",
    "RemoteChatHistoryProvider",
    "RetryPolicy",
    "ServiceSettings",
    "SummariesPage",
    "Version",
    "__version__",
    "connect_llm",
    "content_from_meai",
    "content_to_meai",
    "create_agent",
    "create_or_resume_session",
    "ensure_service",
    "message_from_meai",
    "message_to_meai",
    "messages_from_meai",
    "messages_to_meai",
    "open_store",
    "pause",
    "print_agent_response",
    "print_external_store",
    "print_messages",
    "print_session_id",
    "print_state_bag",
    "run_demo",
    "service_url",
    "show_provider_calls",
    "start_offline_model",
    "start_service",
]

if not TYPE_CHECKING:  # at run time only: a type checker knows every name from the imports above

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'chatlab' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"chatlab.{module}"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
