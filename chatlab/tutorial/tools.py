"""The article's tool: ``GetDateTime`` returns the local date and time as ``yyyy-MM-dd HH:mm:ss``."""

from __future__ import annotations

from datetime import datetime

from agent_framework import tool


def get_date_time() -> str:
    """Local time, formatted like C#'s ``DateTime.Now.ToString("yyyy-MM-dd HH:mm:ss")``."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


GetDateTime = tool(get_date_time, name="GetDateTime", description="現在の日時を取得します。")
"""The MAF tool the agent is given (the article's ``AIFunctionFactory.Create(GetDateTime)``)."""
