"""The store fixtures (one isolated store per backend, real PostgreSQL and Redis) for the operations tests."""

from tests.stores.conftest import *  # noqa: F403
