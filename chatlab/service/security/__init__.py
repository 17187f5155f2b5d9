"""What the article's server leaves out (docs/protections.md); CORS and TLS are Starlette's and uvicorn's own."""

from .auth import ApiKeys, Caller, new_api_key
from .ratelimit import RateLimit, RateLimiter

__all__ = ["ApiKeys", "Caller", "RateLimit", "RateLimiter", "new_api_key"]
