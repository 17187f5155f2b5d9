"""The tutorial's pieces: what the article's ``Program.cs`` sets up around the provider (the agent and its tool, the
LLM or the offline model, the ``Print...`` helpers, the pauses), notebook views and ``python -m chatlab demo``."""
