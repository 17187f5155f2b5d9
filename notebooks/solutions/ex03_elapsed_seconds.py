"""Notebook 3, "On your own": the seconds between the first and the last tool result of a conversation."""

from collections.abc import Sequence
from datetime import datetime

from agent_framework import Message


def elapsed_seconds(messages: Sequence[Message]) -> int | None:
    """What the model works out for "how long since the first time?", from the ``GetDateTime`` results.

    ``None`` when the conversation holds fewer than two tool results (a model that answered without calling the tool
    leaves none): there is nothing to measure.
    """
    times = [
        datetime.strptime(str(content.result), "%Y-%m-%d %H:%M:%S")
        for message in messages
        for content in message.contents
        if content.type == "function_result"
    ]
    if len(times) < 2:
        return None
    return int((times[-1] - times[0]).total_seconds())
