"""Notebook 5, "On your own": count a conversation's messages in the store itself, with no service running."""

from chatlab.stores import open_store


async def count_in_store(store_url: str, key: str) -> int:
    """How many messages the store at ``store_url`` holds for ``key``, read without the service."""
    store = open_store(store_url)
    try:
        return len(await store.get(key))
    finally:
        await store.close()
