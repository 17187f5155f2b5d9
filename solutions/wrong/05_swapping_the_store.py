# A plausible wrong answer to notebook 5's "On your own": it opens a new in-memory store, which is empty.
# tests/test_exercises.py checks that the check cell fails with it.
from chatlab.stores import open_store


async def count_in_store(store_url: str, key: str) -> int | None:
    store = open_store("memory://")
    try:
        return len(await store.get(key))
    finally:
        await store.close()
