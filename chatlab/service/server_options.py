"""The service's connection bounds as :class:`uvicorn.Config` options, public ones only (docs/protections.md,
"Connections and the store are bounded").

uvicorn bounds an idle keep-alive connection and the connections served at once. It does not bound how long a
request's head may take to arrive, nor (with httptools) its size while it arrives
(https://github.com/Kludex/uvicorn/issues/157): a reverse proxy in front does that (nginx's
``client_header_timeout``, ``large_client_header_buffers`` and ``limit_conn``).
"""

from __future__ import annotations

from typing import Any

from .settings import ServiceSettings

#: h11's bound on a request head while it arrives: well above the app's own limits (:mod:`.heads`), so that a head
#: the app answers with its own ``414`` or ``431`` is never cut first with h11's ``400``. httptools has no such bound.
MAX_HEAD_BYTES = 64 * 1024


def server_options(settings: ServiceSettings) -> dict[str, Any]:
    """The :class:`uvicorn.Config` options that enforce the settings' connection bounds."""
    return {
        "timeout_keep_alive": settings.keep_alive_timeout,
        # uvicorn answers 503 when the connections open, the requesting one included, reach the limit: one more
        # than max_connections lets max_connections connections be served
        "limit_concurrency": settings.max_connections + 1,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }
