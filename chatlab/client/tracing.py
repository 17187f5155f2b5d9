"""Traces of the provider's loads and saves, with OpenTelemetry: opt-in and private.

The OpenTelemetry API comes with Agent Framework; nothing is recorded until an application configures an SDK
(``pip install 'chatlab[otel]'``, docs/traces.md). Then the agent's span carries ``gen_ai.conversation.id``, each load
and save is a span of its own (messages and bytes moved, an incremental or a full read), and every request to the
service carries the W3C trace context, so the service's spans join the agent's trace. The conversation key is only ever
written as ``gen_ai.conversation.id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import propagate, trace

__all__ = [
    "CONVERSATION_ID",
    "history_span",
    "mark_conversation",
    "note_bytes",
    "note_read",
    "trace_headers",
]

CONVERSATION_ID = "gen_ai.conversation.id"  # the GenAI semantic conventions' name for a conversation
MESSAGES = "chatlab.history.messages"
BYTES = "chatlab.history.bytes"
READ = "chatlab.history.read"

_tracer = trace.get_tracer("chatlab.client")
_moved: ContextVar[list[int] | None] = ContextVar("chatlab_history_bytes", default=None)


def mark_conversation(key: str) -> None:
    """Name the conversation on the span running now (the agent's ``invoke_agent`` span, in a run)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(CONVERSATION_ID, key)


@contextmanager
def history_span(name: str, key: str) -> Iterator[trace.Span]:
    """A span for one load or save; the bytes its requests moved are added up into ``chatlab.history.bytes``."""
    counter = [0]
    token = _moved.set(counter)
    try:
        with _tracer.start_as_current_span(name, attributes={CONVERSATION_ID: key}) as span:
            try:
                yield span
            finally:
                span.set_attribute(BYTES, counter[0])
    finally:
        _moved.reset(token)


def note_bytes(count: int) -> None:
    """Count bytes a request sent or received into the load or save running now (if any)."""
    counter = _moved.get()
    if counter is not None:
        counter[0] += count


def note_read(kind: str) -> None:
    """Say how the load running now read the conversation: ``incremental``, ``full`` or ``summary``."""
    trace.get_current_span().set_attribute(READ, kind)


def trace_headers() -> dict[str, str]:
    """The W3C ``traceparent`` (and ``tracestate``) of the span running now; empty when nothing is traced."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier
