"""What the article's server leaves out, as options of the chat history service.

One module per idea; :class:`chatlab.service.ServiceSettings` switches each one on:

* :mod:`.auth`: API keys (bearer tokens), each scoped to a namespace of conversations;
* :mod:`.ratelimit`: a per-key token bucket answering ``429`` with ``Retry-After``;
* :mod:`.conditions`: ``ETag``/``If-Match`` versions and ``Idempotency-Key`` retries;
* :mod:`.retry`: the client side: retrying transient failures with backoff.

CORS (Starlette's ``CORSMiddleware``) and TLS (uvicorn's ``ssl_*`` options) need no code
of their own; the service and ``python -m chatlab serve`` wire them. See docs/protections.md.
"""

from .auth import ApiKeys, Caller, new_api_key
from .ratelimit import RateLimit, RateLimiter

__all__ = ["ApiKeys", "Caller", "RateLimit", "RateLimiter", "new_api_key"]
