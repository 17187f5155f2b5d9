"""The provider's calls printed as the article's ``Console.WriteLine`` lines (``[ProvideChatHistoryAsync]``,
``Messages Count: N``, ...), to whatever ``sys.stdout`` is at the time: a notebook cell's, pytest's."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from agent_framework import Message

__all__ = ["PROVIDER_LOG", "describe", "show_provider_calls"]

PROVIDER_LOG = logging.getLogger("chatlab.client.provider")
"""The provider's log: what :func:`show_provider_calls` prints."""


def describe(message: Message | None) -> str:
    """``role , [content types]`` like the article's ``First Message: user , ...`` line."""
    if message is None:
        return " ,"
    return f"{message.role} , [{', '.join(c.type for c in message.contents)}]"


class _StdoutHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stdout`` is at the time of each line."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def show_provider_calls(enabled: bool = True) -> None:
    """Print the provider's calls to stdout as the article does (``[ProvideChatHistoryAsync]``, ...)."""
    for handler in [h for h in PROVIDER_LOG.handlers if isinstance(h, _StdoutHandler)]:
        PROVIDER_LOG.removeHandler(handler)
    if enabled:
        handler = _StdoutHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        PROVIDER_LOG.addHandler(handler)
        PROVIDER_LOG.setLevel(logging.INFO)
    else:
        PROVIDER_LOG.setLevel(logging.NOTSET)
