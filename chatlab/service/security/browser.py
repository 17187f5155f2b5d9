"""What a web page could make a visitor's browser send to a local service, refused before anything else runs
(docs/protections.md, "Loopback is for loopback"): a ``Host`` the service does not serve (DNS rebinding; Starlette's
``TrustedHostMiddleware`` would mangle ``[::1]:5000`` and answer plain text), and a write whose body is not JSON."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import Scope

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: How many served ``Host`` values are remembered: a client sends one or two; a bound keeps strangers' out of memory.
MAX_SERVED_VALUES = 64


def host_name(host: str) -> str | None:
    """The name of a ``Host`` value without port or IPv6 brackets, lower case (``None``: not a host)."""
    host = host.strip().lower()
    if host.startswith("["):
        name, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port.startswith(":") and port[1:].isdigit())):
            return None
    else:
        name, colon, port = host.partition(":")
        if colon and not port.isdigit():
            return None
    name = name.removesuffix(".")
    return name or None


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` is JSON: ``application/json`` or a ``+json`` type, any parameters."""
    if content_type == "application/json":  # what nearly every write sends
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.endswith("+json") and "/" in media)


class ServedHosts:
    """The ``Host`` check (:mod:`..heads` runs it). Served: loopback names, the address the request came in on and
    ``allowed_hosts`` (``*``: any); the port is not compared."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        extra = {host_name(h) or h for h in allowed_hosts}
        self.any_host = "*" in extra
        self.names = frozenset(extra | set(LOOPBACK_NAMES))
        #: ``Host`` values whose name is served on any address (not those served for the address they came in on)
        self.served: set[bytes] = set()

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and detail of a refusal, or ``None`` to serve the request."""
        raw = None
        for name, value in scope["headers"]:  # a loop, not next() of a generator: every request's check
            if name == b"host":
                raw = value
                break
        if raw is None:
            return 400, "the request has no Host header: send the host name you reach the service by"
        if self.any_host or raw in self.served:  # the Host value of nearly every request, known served
            return None
        host = raw.decode("latin-1")
        name = host_name(host)
        if name in self.names and len(self.served) < MAX_SERVED_VALUES:
            self.served.add(raw)
        server = scope.get("server")
        if name is None or (name not in self.names and (server is None or name != server[0])):
            return 421, (
                f"this service does not answer for the host {host!r}: reach it by localhost or its address, "
                "or start it with --allowed-host NAME (CHATLAB_ALLOWED_HOSTS) to serve that name"
            )
        return None
