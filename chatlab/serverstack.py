"""The server stack the service runs on: uvicorn on uvloop + httptools (``fast``), or on asyncio + h11 (``asyncio``).

``chatlab serve``, :class:`chatlab.runner.BackgroundServer` and the benchmark all ask here, so what is measured is
what users run. ``fast`` falls back to the standard half where uvloop or httptools is missing (uvloop has no Windows
build). uvloop is safe in a background thread: uvicorn builds that thread's loop and changes no process-wide policy.
A process that is only the service also keeps its startup objects out of later garbage collections
(:func:`freeze_startup_objects`)."""

from __future__ import annotations

import gc
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

STACK_VARIABLE = "CHATLAB_SERVER_STACK"  # fast (default) or asyncio: the stack of every server chatlab starts

STACKS = ("fast", "asyncio")


@dataclass(frozen=True)
class ServerStack:
    """An event loop and an HTTP parser, as uvicorn names them."""

    name: str
    loop: str
    http: str

    def __str__(self) -> str:
        """The parser and the loop, as the benchmark and ``serve`` print them."""
        return f"{self.http}, {self.loop} loop"

    def uvicorn_options(self) -> dict[str, Any]:
        """The :class:`uvicorn.Config` options that choose this stack."""
        return {"loop": self.loop, "http": self.http}


def server_stack(name: str | None = None) -> ServerStack:
    """The stack called ``name``, by default the one ``CHATLAB_SERVER_STACK`` names (else ``fast``)."""
    chosen = (name or os.environ.get(STACK_VARIABLE, "") or "fast").strip().lower()
    if chosen == "asyncio":
        return ServerStack("asyncio", "asyncio", "h11")
    if chosen != "fast":
        raise ValueError(f"{STACK_VARIABLE}={chosen!r} is not a server stack: choose from {', '.join(STACKS)}")
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return ServerStack("fast", loop, "httptools" if importlib.util.find_spec("httptools") else "h11")


def freeze_startup_objects() -> None:
    """Keep what a service process holds from its start (modules, the app, the store's client: about 90,000 objects
    the collector tracks) out of every later garbage collection (``gc.freeze``); they live as long as the process.

    A full collection walks every tracked object while it holds the event loop. Requests waiting on a database keep
    objects alive across the young collections, which moves them to the oldest generation and sets off a full
    collection every second or so under load: about 45 ms each over the startup objects, the service's p99 on Redis.
    Frozen, a full collection walks only what requests made (about 1 ms). For a process that is only the service
    (``chatlab serve``); a notebook's background service leaves the notebook's process as it is.
    """
    gc.collect()  # what startup left as garbage is freed, not frozen
    gc.freeze()
