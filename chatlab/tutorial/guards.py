"""What the notebooks check before they go on, so that a learner's slip ends in one plain sentence, not a traceback.

A :class:`NotebookStepError` says what happened and which cell or command fixes it; in a notebook it shows as that
sentence alone (IPython's ``_render_traceback_`` protocol), since the frames inside chatlab would only hide it.
"""

from __future__ import annotations

import httpx
from agent_framework import HistoryProvider

from ..vocabulary import SERVICE_URL_VARIABLE

# The parts of notebook 2's %%writefile cells, and a method each part writes, as notebooks 3 and 4 call them.
PROVIDER_PARTS = {
    "(1) the constructor and the session state": ("try_get_external_conversation_key", "get_or_initialize_state"),
    "(2) the load hook": ("get_messages",),
    "(3) the store hook": ("after_run", "save_messages"),
    "(4) the helper methods": ("get_conversation_summaries", "session_exists", "attach_to_session", "aclose"),
}


class NotebookStepError(Exception):
    """A step of the course cannot go on; the message says why and what to run."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error: the sentence, without the frames."""
        return [f"{type(self).__name__}: {self}"]


def require_complete_provider(provider_class: type) -> None:
    """Refuse a ``RemoteChatHistoryProvider`` from a ``remote_provider.py`` that notebook 2 wrote only in part."""
    written: set[str] = set()
    for klass in provider_class.__mro__:
        if issubclass(klass, HistoryProvider) and klass is not HistoryProvider:
            written.update(vars(klass))
    missing = [part for part, methods in PROVIDER_PARTS.items() if not all(name in written for name in methods)]
    if missing:
        raise NotebookStepError(
            f"remote_provider.py lacks part {' and '.join(name.split(' ')[0] for name in missing)} of your provider "
            f"({'; '.join(missing)}): notebook 2 was run only in part. Run all of notebook 2's %%writefile cells "
            "(Run All there), then run this cell again."
        )


def conversations_held(service_url: str) -> set[str]:
    """The keys of every conversation the service holds now; a plain error when no service answers there."""
    try:
        response = httpx.get(f"{service_url}/chat-history", timeout=10)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise NotebookStepError(
            f"No chat history service answers at {service_url} ({type(error).__name__}; {SERVICE_URL_VARIABLE} names "
            f"it): start it there (python -m chatlab serve --port <its port>), or run "
            f"os.environ.pop({SERVICE_URL_VARIABLE!r}) to use one started in this notebook, then run this cell again."
        ) from error
    return {summary["conversationKey"] for summary in response.json()}
