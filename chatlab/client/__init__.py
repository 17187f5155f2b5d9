"""The client side: what an agent's process runs to keep its history in the chat history service.

* :mod:`.http`: :class:`AsyncChatHistoryClient` and :class:`ChatHistoryClient`, typed clients of the service;
* :mod:`.operations`: each operation's request and the meaning of its answer (what both clients share);
* :mod:`.provider`: :class:`RemoteChatHistoryProvider`, the article's provider, built on the async client;
* :mod:`.cache`: what the provider already loaded, so a turn reads only what is new;
* :mod:`.window`: the end of a long conversation that is handed to the model;
* :mod:`.codec`: MAF ``Message`` <-> the service's JSON (Microsoft.Extensions.AI's ``ChatMessage``), lossless;
* :mod:`.retry`: retrying transient failures with backoff;
* :mod:`.errors`: the errors the client raises, each saying what to do;
* :mod:`.keys`: new conversation keys; :mod:`.console`: the provider's calls printed as the article does.

Nothing here imports the service side: the two meet only over HTTP and in :mod:`chatlab.vocabulary`.
"""

from .errors import (
    ChatHistoryCodecError,
    ChatHistoryServiceConflict,
    ChatHistoryServiceError,
    ChatHistoryServiceProtocolError,
    ChatHistoryServiceStatusError,
    ChatHistoryServiceUnavailable,
    ChatlabError,
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
    "IfMatch",
    "MessagesPage",
    "OutgoingMessages",
    "RetryPolicy",
    "SummariesPage",
    "Verify",
    "encode_messages",
    "service_url",
]
