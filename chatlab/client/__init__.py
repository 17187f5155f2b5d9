"""The client side: what an agent's process runs to keep its history in the chat history service.

* :mod:`.provider`: :class:`~chatlab.client.provider.RemoteChatHistoryProvider`, the article's provider;
* :mod:`.codec`: MAF ``Message`` <-> the service's JSON (Microsoft.Extensions.AI's ``ChatMessage``);
* :mod:`.cache`: what the provider already loaded, so a turn reads only what is new;
* :mod:`.window`: the end of a long conversation that is handed to the model;
* :mod:`.retry`: retrying transient failures with backoff;
* :mod:`.errors`: the errors the client raises, each saying what to do.

Nothing here imports the service side: the two meet only over HTTP and in :mod:`chatlab.vocabulary`.
"""
