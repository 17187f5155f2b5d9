"""Notebook 1, "On your own": ``GET /chat-history/{conversationKey}/{index}`` returns one message."""

from typing import Any

from fastapi import FastAPI, HTTPException


def add_get_one_message(app: FastAPI, store: Any) -> None:
    """Add the endpoint to ``app``; it reads ``store`` (the notebook's ``InMemoryChatHistoryStore``)."""

    @app.get("/chat-history/{conversationKey}/{index}")
    def get_one_message(conversationKey: str, index: int) -> dict[str, Any]:
        messages = store.get_messages(conversationKey)
        if not 0 <= index < len(messages):
            raise HTTPException(status_code=404, detail=f"{conversationKey} has no message {index}")
        message: dict[str, Any] = messages[index]
        return message
