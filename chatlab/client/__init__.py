"""The client side: typed clients (:mod:`.http`), the article's provider (:mod:`.provider`) and the MEAI codec
(:mod:`.codec`). It meets the service side only over HTTP and in :mod:`chatlab.vocabulary`."""

from .errors import (
    ChatHistoryCodecError,
    ChatHistoryServiceConflict,
    ChatHistoryServiceError,
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
    ChatlabError,
    DivergentHistoryError,
)
from .http import AsyncChatHistoryClient, ChatHistoryClient, Verify, service_url
from .operations import IfMatch, MessagesPage, OutgoingMessages, SummariesPage, encode_messages
from .retry import RetryPolicy

__all__ = [
    "AsyncChatHistoryClient",
    "ChatHistoryClient",
    "ChatHistoryCodecError",
    "ChatHistoryServiceConflict",
    "ChatHistoryServiceError",
    "ChatHistoryServiceProtocolError",
    "ChatHistoryServiceStatusError",
    "ChatHistoryServiceUnavailable",
    "ChatlabError",
    "DivergentHistoryError",
    "IfMatch",
    "MessagesPage",
    "OutgoingMessages",
    "RetryPolicy",
    "SummariesPage",
    "Verify",
    "encode_messages",
    "service_url",
]
