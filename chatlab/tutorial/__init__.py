"""The tutorial's pieces: what the article's ``Program.cs`` sets up around the provider.

* :mod:`.agent` and :mod:`.tools`: the article's ``SampleAgent`` and its ``GetDateTime`` tool;
* :mod:`.llm`: the connection to an OpenAI-compatible LLM (LM Studio by default);
* :mod:`.offline_model`: a small deterministic model for machines without one (CI, the committed notebooks);
* :mod:`.display`: the article's ``Print...`` helpers;
* :mod:`.views`: HTML views for notebooks (a conversation as a chat, the summaries as a table);
* :mod:`.demo`: the article's whole run, as ``python -m chatlab demo``;
* :mod:`.pause`: the article's pauses, as a countdown the stop button ends at once.
"""
