"""The tutorial's pieces: what the article's ``Program.cs`` sets up around the provider.

The agent and its tool, the LLM connection (or the offline model), the article's ``Print...`` helpers, notebook views,
the whole run as ``python -m chatlab demo``, and the article's pauses.
"""
