"""The article's tool (its ``AIFunctionFactory.Create(GetDateTime)``): the local date and time."""

from __future__ import annotations

from datetime import datetime

from agent_framework import tool


def get_date_time() -> str:
    """Local time, formatted like C#'s ``DateTime.Now.ToString("yyyy-MM-dd HH:mm:ss")``."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


GetDateTime = tool(get_date_time, name="GetDateTime", description="現在の日時を取得します。")
