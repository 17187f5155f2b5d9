"""chatlab: out-of-process chat history for Microsoft Agent Framework agents.

The names below are imported on first use (PEP 562), so ``import chatlab`` stays light and has no side effects;
a type checker reads the ``TYPE_CHECKING`` imports (``X as X``: explicitly re-exported) and sees the real types."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .client.codec import content_from_meai as content_from_meai
    from .client.codec import content_to_meai as content_to_meai
    from .client.codec import message_from_meai as message_from_meai
    from .client.codec import message_to_meai as message_to_meai
    from .client.codec import messages_from_meai as messages_from_meai
    from .client.codec import messages_to_meai as messages_to_meai
    from .client.compaction import Compaction as Compaction
    from .client.errors import ChatHistoryCodecError as ChatHistoryCodecError
    from .client.errors import ChatHistoryServiceConflict as ChatHistoryServiceConflict
    from .client.errors import ChatHistoryServiceError as ChatHistoryServiceError
    from .client.errors import ChatHistoryServiceProtocolError as ChatHistoryServiceProtocolError
    from .client.errors import ChatHistoryServiceStatusError as ChatHistoryServiceStatusError
    from .client.errors import ChatHistoryServiceUnavailable as ChatHistoryServiceUnavailable
    from .client.errors import ChatlabError as ChatlabError
    from .client.errors import LLMUnavailableError as LLMUnavailableError
    from .client.http import AsyncChatHistoryClient as AsyncChatHistoryClient
    from .client.http import ChatHistoryClient as ChatHistoryClient
    from .client.operations import MessagesPage as MessagesPage
    from .client.operations import SummariesPage as SummariesPage
    from .client.provider import ChatHistorySummary as ChatHistorySummary
    from .client.provider import RemoteChatHistoryProvider as RemoteChatHistoryProvider
    from .client.provider import service_url as service_url
    from .client.provider import show_provider_calls as show_provider_calls
    from .client.retry import RetryPolicy as RetryPolicy
    from .service import ServiceSettings as ServiceSettings
    from .service import ensure_service as ensure_service
    from .service import start_service as start_service
    from .stores import open_store as open_store
    from .tutorial.agent import create_agent as create_agent
    from .tutorial.demo import run_demo as run_demo
    from .tutorial.display import create_or_resume_session as create_or_resume_session
    from .tutorial.display import print_agent_response as print_agent_response
    from .tutorial.display import print_external_store as print_external_store
    from .tutorial.display import print_messages as print_messages
    from .tutorial.display import print_session_id as print_session_id
    from .tutorial.display import print_state_bag as print_state_bag
    from .tutorial.llm import LLMConnection as LLMConnection
    from .tutorial.llm import connect_llm as connect_llm
    from .tutorial.offline_model import start_offline_model as start_offline_model
    from .tutorial.pause import pause as pause
    from .tutorial.tools import GetDateTime as GetDateTime
    from .vocabulary import ConversationSummary as ConversationSummary
    from .vocabulary import Version as Version

# each module and the names it defines (tests/test_public_api.py checks _LAZY matches the imports above)
_MODULES = {
    "client.provider": "RemoteChatHistoryProvider ChatHistorySummary show_provider_calls service_url",
    "client.compaction": "Compaction",
    "client.http": "AsyncChatHistoryClient ChatHistoryClient",
    "client.operations": "MessagesPage SummariesPage",
    "client.errors": "ChatlabError ChatHistoryServiceError ChatHistoryServiceUnavailable ChatHistoryServiceStatusError "
    "ChatHistoryServiceConflict ChatHistoryServiceProtocolError ChatHistoryCodecError LLMUnavailableError",
    "client.codec": "message_to_meai message_from_meai messages_to_meai messages_from_meai content_to_meai "
    "content_from_meai",
    "client.retry": "RetryPolicy",
    "service": "ServiceSettings start_service ensure_service",
    "stores": "open_store",
    "vocabulary": "ConversationSummary Version",
    "tutorial.llm": "LLMConnection connect_llm",
    "tutorial.offline_model": "start_offline_model",
    "tutorial.pause": "pause",
    "tutorial.tools": "GetDateTime",
    "tutorial.agent": "create_agent",
    "tutorial.display": "print_external_store print_session_id print_state_bag print_agent_response print_messages "
    "create_or_resume_session",
    "tutorial.demo": "run_demo",
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = ["__version__", *_LAZY]

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
