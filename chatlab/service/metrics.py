"""Prometheus metrics at ``GET /metrics`` (``serve --metrics``; docs/operations.md), with ``prometheus_client``. Labels
come from a fixed set (``other`` for unknown methods and paths, a route's template, never a key); one registry per app.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..stores import ChatHistoryStore, InMemoryChatHistoryStore, StoreError
from ..vocabulary import Refused
from .security.auth import ApiKeys
from .wrapped_store import WrappedStore


class Metrics:
    """The service's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "chatlab_http_requests", "HTTP requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "chatlab_http_request_duration_seconds", "Time to answer", ["method", "route"], registry=self.registry
        )
        self.store_latency = Histogram(
            "chatlab_store_operation_duration_seconds", "Time of a store call", ["operation"], registry=self.registry
        )
        self.store_errors = Counter(
            "chatlab_store_errors", "Store calls that failed (StoreError)", ["operation"], registry=self.registry
        )


#: The methods counted by name; any other is ``other``.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER = "other"


@dataclass
class MetricsMiddleware:
    """ASGI middleware: counts and times every HTTP request by method, route template and status."""

    app: Any
    metrics: Metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500

        async def send_and_note(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = getattr(scope.get("route"), "path", None)  # a template of the app's own routes, or None
            method = scope["method"] if scope["method"] in KNOWN_METHODS else OTHER
            self.metrics.requests.labels(method, route or OTHER, str(status)).inc()
            self.metrics.latency.labels(method, route or OTHER).observe(time.perf_counter() - start)


def add_metrics(app: FastAPI, store: ChatHistoryStore, keys: ApiKeys | None) -> MeteredStore:
    """Serve ``/metrics`` (outside the rate limit and the OpenAPI description; with ``keys``, to a key's holder) and
    count requests; the store the routes are to use, each call timed."""
    metrics = Metrics()
    if isinstance(store, InMemoryChatHistoryStore):  # gauges of what it holds, read when scraped
        conversations = Gauge("chatlab_conversations", "Conversations stored", registry=metrics.registry)
        messages = Gauge("chatlab_messages", "Messages stored", registry=metrics.registry)
        conversations.set_function(lambda: store.totals()[0])
        messages.set_function(lambda: store.totals()[1])

    @app.get("/metrics", include_in_schema=False)
    async def scrape(request: Request) -> Response:
        """The Prometheus text of the metrics; with API keys, only for a caller with a valid one."""
        if keys is not None:
            scheme, _, key = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or keys.namespace_of(key.strip()) is None:
                raise Refused(
                    401,
                    "/metrics needs an API key of the service: send `Authorization: Bearer <key>`",
                    headers={"WWW-Authenticate": 'Bearer realm="chat-history"'},
                )
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return MeteredStore(store, metrics)


#: The metric label of an operation, where it is not the operation's own name: a read is a read however it answers.
_LABELS = {"read_array": "read"}


class MeteredStore(WrappedStore):
    """The routes' store when metrics are on: each call of ``inner``, timed into :class:`Metrics`."""

    def __init__(self, inner: ChatHistoryStore, metrics: Metrics) -> None:
        super().__init__(inner)
        self.metrics = metrics

    async def around(self, operation: str, call: Awaitable[Any]) -> Any:
        """The call timed into the store latency histogram; a store error counted too."""
        label = _LABELS.get(operation, operation)
        start = time.perf_counter()
        try:
            return await call
        except StoreError:
            self.metrics.store_errors.labels(label).inc()
            raise
        finally:
            self.metrics.store_latency.labels(label).observe(time.perf_counter() - start)
