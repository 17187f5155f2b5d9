"""chatlab: out-of-process chat history for Microsoft Agent Framework agents."""

__version__ = "0.1.0"
