"""chatlab's exceptions: each message says what failed, where, and what to do about it."""

from __future__ import annotations

__all__ = [
    "ChatHistoryCodecError",
    "ChatHistoryServiceError",
    "ChatHistoryServiceStatusError",
    "ChatHistoryServiceUnavailable",
    "ChatlabError",
    "LLMUnavailableError",
]

START_HINT = "Start it with `python -m chatlab serve --port 5000`, or set CHAT_HISTORY_SERVICE_URL to where it runs."


class ChatlabError(Exception):
    """Base class of every error chatlab raises on purpose."""


class ChatHistoryCodecError(ChatlabError, ValueError):
    """A message could not be converted between MAF and the service's JSON."""


class ChatHistoryServiceError(ChatlabError):
    """The chat history service could not do what the provider asked; nothing was half-written.

    ``url`` is the request's URL, ``status`` the HTTP status (``None`` when no answer came).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class ChatHistoryServiceUnavailable(ChatHistoryServiceError):
    """No answer: the service is not running, not reachable, or too slow."""

    @classmethod
    def for_request(cls, method: str, url: str, reason: str) -> ChatHistoryServiceUnavailable:
        return cls(
            f"The chat history service at {url} did not answer {method} ({reason}). {START_HINT}",
            url=url,
        )


class ChatHistoryServiceStatusError(ChatHistoryServiceError):
    """The service answered with an error status; ``detail`` is what it said."""

    def __init__(self, message: str, *, url: str, status: int, detail: str = "") -> None:
        super().__init__(message, url=url, status=status)
        self.detail = detail

    @classmethod
    def for_response(cls, method: str, url: str, status: int, detail: str) -> ChatHistoryServiceStatusError:
        if status >= 500:
            advice = "The service failed; check its log and try again."
        elif status == 404:
            advice = (
                "Check that CHAT_HISTORY_SERVICE_URL points at a chat history service "
                "and that the conversation key is one it accepts."
            )
        elif status == 401:
            advice = "Give the provider the service's API key (api_key=..., or CHAT_HISTORY_SERVICE_API_KEY)."
        elif status == 429:
            advice = "The service's rate limit was reached; nothing was changed. Try again later."
        else:
            advice = "The request was refused and nothing was changed."
        shown = f": {detail}" if detail else ""
        return cls(
            f"The chat history service answered {method} {url} with HTTP {status}{shown}. {advice}",
            url=url,
            status=status,
            detail=detail,
        )


class LLMUnavailableError(ChatlabError):
    """The configured LLM endpoint does not answer (only raised when ``CHATLAB_LLM=endpoint``)."""
