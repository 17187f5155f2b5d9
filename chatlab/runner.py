"""Run an ASGI app with uvicorn in a daemon thread, for notebooks and tests. The runner binds the socket itself, so
port 0 works and the URL is known before the first request. Starting a server again with the same arguments returns
the running one, so a notebook cell is safe to re-run."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import uvicorn

from .serverstack import server_stack

log = logging.getLogger(__name__)


class BackgroundServer:
    """One uvicorn server on a socket of its own, in a daemon thread: :meth:`start` and :meth:`stop`, or ``with``.

    ``ssl_certfile`` and ``ssl_keyfile`` (with ``ssl_keyfile_password`` for an encrypted key) serve TLS;
    ``server_options`` go to :class:`uvicorn.Config` as they are (timeouts, limits, the HTTP protocol).
    """

    _running: ClassVar[list[BackgroundServer]] = []
    _registry_lock: ClassVar[threading.RLock] = threading.RLock()

    def __init__(
        self,
        app: Any,
        *,
        name: str = "server",
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        startup_timeout: float = 15.0,
        ssl_certfile: str | os.PathLike[str] | None = None,
        ssl_keyfile: str | os.PathLike[str] | None = None,
        ssl_keyfile_password: str | None = None,
        access_log: bool = False,
        server_options: Mapping[str, Any] | None = None,
    ) -> None:
        if (ssl_certfile is None) != (ssl_keyfile is None):
            raise ValueError("TLS needs both a certificate and its key (ssl_certfile and ssl_keyfile)")
        self.app = app
        self.name = name
        self.host = host
        self.requested_port = port
        self.startup_timeout = startup_timeout
        self.access_log = access_log
        #: what :meth:`start` gives :class:`uvicorn.Config` besides the app
        self.options: dict[str, Any] = {
            "log_level": log_level,
            "ssl_certfile": ssl_certfile,
            "ssl_keyfile": ssl_keyfile,
            "ssl_keyfile_password": ssl_keyfile_password,
        }
        self.options.update(server_options or {})
        self.arguments: object = None  # what ensure() compares to decide whether this server is the one asked for
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @classmethod
    def ensure(
        cls,
        app_factory: Any,
        *,
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        identity: object = None,
        **kwargs: Any,
    ) -> BackgroundServer:
        """The running server started with equal arguments (``identity``: what ``app_factory`` builds), else a new one;
        a fixed port taken by a server started with other arguments raises ``RuntimeError``, never hands it back."""
        arguments = (identity, kwargs)
        with cls._registry_lock:
            cls._running[:] = [server for server in cls._running if server.is_running]
            for existing in cls._running:
                if (existing.name, existing.host, existing.requested_port) != (name, host, port):
                    continue
                if existing.arguments == arguments:
                    return existing
                if port != 0:
                    raise RuntimeError(
                        f"{name} is already running on {host}:{port} with other arguments (store, settings or TLS): "
                        "stop that server first (its .stop()), or pass port=0 to start another one on a free port"
                    )
            server = cls(app_factory(), name=name, host=host, port=port, **kwargs)
            server.arguments = arguments
            server.start()
            return server

    @property
    def is_running(self) -> bool:
        """Whether the server thread is alive and uvicorn has started serving."""
        if self._thread is None or self._server is None:
            return False
        return self._thread.is_alive() and self._server.started

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server (``https://`` when it serves TLS)."""
        if self.port is None:
            raise RuntimeError(f"{self.name} is not running: call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.options["ssl_certfile"] else "http"
        return f"{scheme}://{host}:{self.port}"

    def start(self) -> BackgroundServer:
        """Bind, start serving in a daemon thread and wait until requests are answered."""
        if self.is_running:
            return self
        sock = self._bind()
        self.port = sock.getsockname()[1]
        options = {**server_stack().uvicorn_options(), **self.options}
        config = uvicorn.Config(self.app, log_config=None, access_log=self.access_log, lifespan="on", **options)
        server = uvicorn.Server(config)
        self._server = server
        if self.access_log:  # a quiet server before this one switched the process's access logger off
            logging.getLogger("uvicorn.access").propagate = True
        self._error = None
        thread = threading.Thread(target=self._serve, args=(server, sock), name=f"chatlab-{self.name}", daemon=True)
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not server.started:
            error = self._error
            self.stop()
            reason = repr(error) if error else f"not serving after {self.startup_timeout} s"
            raise RuntimeError(f"{self.name} failed to start on {self.host}:{self.port}: {reason}")
        with self._registry_lock:
            self._running.append(self)
        log.info("%s listening on %s", self.name, self.url)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread to end; stopping twice is harmless."""
        with self._registry_lock:
            self._running[:] = [server for server in self._running if server is not self]
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        """Start the server (see :meth:`start`)."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop the server (see :meth:`stop`)."""
        self.stop()

    def __repr__(self) -> str:
        """The server's name and URL, or that it is stopped."""
        return f"<{type(self).__name__} {self.name} {self.url if self.is_running else 'stopped'}>"

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say so (else Nagle + delayed ACK
        # add ~40 ms to every response with a body)
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.requested_port))
        except OSError as exc:
            sock.close()
            raise OSError(
                exc.errno,
                f"cannot start {self.name} on {self.host}:{self.requested_port}: {exc.strerror}. "
                "Is another server using that port? Stop it, or pass port=0 for any free port.",
            ) from exc
        sock.listen(2048)
        sock.setblocking(False)
        return sock

    def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported by start or left for inspection
            self._error = exc
        finally:
            sock.close()
