"""OpenTelemetry traces of the service (``serve --traces``, ``CHATLAB_TRACES``; docs/traces.md): opt-in and private.

Each request is a server span named by its method and route template (``POST /chat-history/{conversationKey}``),
joined to the caller's trace through the W3C ``traceparent`` header, with a child span per store operation. No
attribute carries the request's path or query: the template stands in for the path, so a conversation key (which may
be a user's id) never reaches a span. Spans go to the application's tracer provider; :func:`configure_from_environment`
installs one from the standard ``OTEL_*`` variables when none is.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from opentelemetry import propagate, trace

from ..stores import ChatHistoryStore
from .wrapped_store import WrappedStore

__all__ = ["TracedStore", "TracingMiddleware", "add_tracing", "configure_from_environment"]

_tracer = trace.get_tracer("chatlab.service")


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers as text, for the propagator (the ASGI scope holds them as bytes)."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", [])}


@dataclass
class TracingMiddleware:
    """ASGI middleware: a server span per HTTP request, named ``METHOD /route/{template}`` once routing chose one."""

    app: Any

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        parent = propagate.extract(_headers(scope))
        with _tracer.start_as_current_span(method, context=parent, kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", method)

            async def send_and_note(message: Any) -> None:
                if message["type"] == "http.response.start":
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            try:
                await self.app(scope, receive, send_and_note)
            finally:
                route = getattr(scope.get("route"), "path", None)  # the app's own template, never the path
                if route is not None:
                    span.set_attribute("http.route", route)
                    span.update_name(f"{method} {route}")


class TracedStore(WrappedStore):
    """The routes' store when traces are on: each call of ``inner`` is a span, a child of the request's."""

    def __init__(self, inner: ChatHistoryStore) -> None:
        super().__init__(inner)
        self.system = type(inner).__name__

    async def around(self, operation: str, call: Awaitable[Any]) -> Any:
        """The call in a span of its own, named by the operation (no arguments kept: they hold conversation keys)."""
        attributes = {"db.operation.name": operation, "db.system.name": self.system}
        with _tracer.start_as_current_span(f"store {operation}", attributes=attributes):
            return await call


def configure_from_environment() -> None:
    """Install a tracer provider from the standard variables when the application has none: ``OTEL_TRACES_EXPORTER``
    (``otlp``, the default, or ``console``; ``none``: nothing), ``OTEL_EXPORTER_OTLP_*`` for where OTLP goes,
    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``. Needs ``pip install 'chatlab[otel]'``."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError as exc:
        raise RuntimeError("traces need the OpenTelemetry SDK: pip install 'chatlab[otel]'") from exc

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return  # the application configured its own
    exporters: list[SpanExporter] = []
    for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(","):
        if name.strip() == "console":
            exporters.append(ConsoleSpanExporter())
        elif name.strip() == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        elif name.strip() not in ("", "none"):
            raise ValueError(f"OTEL_TRACES_EXPORTER: unknown exporter {name.strip()!r}; use otlp, console or none")
    provider = TracerProvider()  # its resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


def add_tracing(app: FastAPI, store: ChatHistoryStore) -> TracedStore:
    """Trace every request of ``app`` (a tracer provider configured from the environment if there is none); the store
    the routes are to use, each call a span."""
    configure_from_environment()
    app.add_middleware(TracingMiddleware)
    return TracedStore(store)
