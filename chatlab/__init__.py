"""chatlab: out-of-process chat history for Microsoft Agent Framework agents."""

__version__ = "0.1.0"

# The agent side, imported on first use (PEP 562) so `import chatlab` stays light and has no side effects.
_AGENT_API = {
    "RemoteChatHistoryProvider": "provider",
    "ChatHistorySummary": "provider",
    "show_provider_calls": "provider",
    "service_url": "provider",
    "message_to_meai": "codec",
    "message_from_meai": "codec",
    "messages_to_meai": "codec",
    "messages_from_meai": "codec",
    "content_to_meai": "codec",
    "content_from_meai": "codec",
    "ChatlabError": "errors",
    "ChatHistoryServiceError": "errors",
    "ChatHistoryServiceUnavailable": "errors",
    "ChatHistoryServiceStatusError": "errors",
    "ChatHistoryCodecError": "errors",
    "LLMUnavailableError": "errors",
    "LLMConnection": "llm",
    "connect_llm": "llm",
    "start_offline_model": "offline_model",
    "GetDateTime": "tools",
    "create_agent": "agent",
    "print_external_store": "display",
    "print_session_id": "display",
    "print_state_bag": "display",
    "print_agent_response": "display",
    "print_messages": "display",
    "create_or_resume_session": "display",
    "run_demo": "demo",
    "RetryPolicy": "protections.retry",
}


def __getattr__(name: str):  # noqa: ANN202 - module-level lazy attribute access
    module = _AGENT_API.get(name)
    if module is None:
        raise AttributeError(f"module 'chatlab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"chatlab.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_AGENT_API])
