"""chatlab's exceptions: each message says what failed, where, and what to do about it."""

from __future__ import annotations

from typing import Self

from ..vocabulary import API_KEY_VARIABLE, SERVICE_URL_VARIABLE, Version

__all__ = [
    "ChatHistoryCodecError",
    "ChatHistoryServiceConflict",
    "ChatHistoryServiceError",
    "ChatHistoryServiceProtocolError",
    "ChatHistoryServiceStatusError",
    "ChatHistoryServiceUnavailable",
    "ChatlabError",
    "DivergentHistoryError",
    "LLMUnavailableError",
]

# A notebook's service comes back by re-running its cell (on a new port); one's own needs starting and pointing at.
START_HINT = (
    "If a notebook or script of yours started it (chatlab.ensure_service() or start_service()), run that step again "
    "and use the URL it prints; otherwise start one with `python -m chatlab serve --port 5000` and set "
    f"{SERVICE_URL_VARIABLE}=http://localhost:5000 (or to where it runs)."
)

_ADVICE = {  # what to do about an error status below 500
    401: f"Give the client the service's API key (api_key=..., or {API_KEY_VARIABLE}).",
    404: (
        f"Check that {SERVICE_URL_VARIABLE} points at a chat history service "
        "and that the conversation key is one it accepts."
    ),
    412: "Read the conversation again, redo your change on what it holds now and send it again.",
    429: "The service's rate limit was reached; nothing was changed. Try again later.",
}


class ChatlabError(Exception):
    """Base class of every error chatlab raises on purpose."""


class ChatHistoryCodecError(ChatlabError, ValueError):
    """A message could not be converted between MAF and the service's JSON."""


class ChatHistoryServiceError(ChatlabError):
    """The service could not do what was asked; nothing was half-written. ``status``: ``None`` when no answer came."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class ChatHistoryServiceUnavailable(ChatHistoryServiceError):
    """No answer: the service is not running, not reachable, or too slow."""

    @classmethod
    def for_request(cls, method: str, url: str, reason: str) -> ChatHistoryServiceUnavailable:
        """The error for a request that got no answer, with how to start the service."""
        return cls(f"The chat history service at {url} did not answer {method} ({reason}). {START_HINT}", url=url)


class ChatHistoryServiceStatusError(ChatHistoryServiceError):
    """The service answered with an error status; ``detail`` is what it said."""

    def __init__(self, message: str, *, url: str, status: int, detail: str = "") -> None:
        super().__init__(message, url=url, status=status)
        self.detail = detail

    @classmethod
    def for_response(cls, method: str, url: str, status: int, detail: str) -> Self:
        """The error for a refusal or failure, with what the service said and what to do about it."""
        if status >= 500:
            advice = "The service failed; check its log and try again."
        else:
            advice = _ADVICE.get(status, "The request was refused and nothing was changed.")
        shown = f": {detail}" if detail else ""
        message = f"The chat history service answered {method} {url} with HTTP {status}{shown}. {advice}"
        return cls(message, url=url, status=status, detail=detail)


class ChatHistoryServiceConflict(ChatHistoryServiceStatusError):
    """``412``: the conversation is no longer at the ``If-Match`` version; ``current`` is where it is now. Nothing
    was written: read it again, redo the change on what it holds now, and send it with ``if_match=error.current``."""

    current: Version | None = None


class ChatHistoryServiceProtocolError(ChatHistoryServiceError):
    """Something answered, but not as a chat history service does (not its JSON, no version)."""

    @classmethod
    def for_answer(cls, url: str, why: str) -> ChatHistoryServiceProtocolError:
        """The error for an answer that is not a chat history service's, with where to point the client."""
        hint = f"Check {SERVICE_URL_VARIABLE}; start the service with `python -m chatlab serve --port 5000`."
        return cls(f"{url} did not answer like a chat history service ({why}). {hint}", url=url)


class DivergentHistoryError(ChatlabError, ValueError):
    """A run's input resends the conversation but differs from it at stored message ``position`` (1-based)."""

    def __init__(self, key: str, position: int) -> None:
        super().__init__(
            f"the run's input differs from conversation {key} at its message {position}: history is append-only, "
            f"so continue on a fork through message {position - 1} (provider.fork_session(session, "
            f"through={position - 1}), or on_divergence='fork'), or send only the new messages"
        )
        self.key = key
        self.position = position


class LLMUnavailableError(ChatlabError):
    """The configured LLM endpoint does not answer (only raised when ``CHATLAB_LLM=endpoint``)."""
