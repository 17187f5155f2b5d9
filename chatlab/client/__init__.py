"""The client side: what an agent's process runs to keep its history in the chat history service.

* :mod:`.http`: :class:`AsyncChatHistoryClient` and :class:`ChatHistoryClient`, typed clients of the service, whose
  requests and answers are :mod:`.operations`', retries :mod:`.retry`'s and errors :mod:`.errors`';
* :mod:`.provider`: :class:`RemoteChatHistoryProvider`, the article's provider, with :mod:`.cache` (a turn reads only
  what is new), :mod:`.window`, :mod:`.compaction`, :mod:`.replay`, :mod:`.keys` and :mod:`.console`;
* :mod:`.codec`: MAF ``Message`` <-> the service's JSON (Microsoft.Extensions.AI's ``ChatMessage``), lossless.

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
