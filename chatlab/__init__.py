"""chatlab: out-of-process chat history for Microsoft Agent Framework agents."""

__version__ = "0.1.0"

# The agent side, imported on first use (PEP 562) so `import chatlab` stays light and has no side effects.
_AGENT_API = {
    "RemoteChatHistoryProvider": "client.provider",
    "ChatHistorySummary": "client.provider",
    "show_provider_calls": "client.provider",
    "service_url": "client.provider",
    "message_to_meai": "client.codec",
    "message_from_meai": "client.codec",
    "messages_to_meai": "client.codec",
    "messages_from_meai": "client.codec",
    "content_to_meai": "client.codec",
    "content_from_meai": "client.codec",
    "ChatlabError": "client.errors",
    "ChatHistoryServiceError": "client.errors",
    "ChatHistoryServiceUnavailable": "client.errors",
    "ChatHistoryServiceStatusError": "client.errors",
    "ChatHistoryCodecError": "client.errors",
    "LLMUnavailableError": "client.errors",
    "LLMConnection": "tutorial.llm",
    "connect_llm": "tutorial.llm",
    "start_offline_model": "tutorial.offline_model",
    "GetDateTime": "tutorial.tools",
    "create_agent": "tutorial.agent",
    "print_external_store": "tutorial.display",
    "print_session_id": "tutorial.display",
    "print_state_bag": "tutorial.display",
    "print_agent_response": "tutorial.display",
    "print_messages": "tutorial.display",
    "create_or_resume_session": "tutorial.display",
    "run_demo": "tutorial.demo",
    "RetryPolicy": "client.retry",
}


def __getattr__(name: str):
    module = _AGENT_API.get(name)
    if module is None:
        raise AttributeError(f"module 'chatlab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"chatlab.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_AGENT_API])
