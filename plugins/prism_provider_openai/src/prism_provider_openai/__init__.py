"""Prism's provider for OpenAI and every server speaking streamed Chat Completions.

Compose it with ``create_agent(model="openai:gpt-4.1-mini",
plugins=[prism_provider_openai.plugin])`` (or ``plugins=discover_plugins()``); the key and base
URL come from ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``. For explicit settings pass
``provider=create_openai_provider(...)``. Failures carry the shared provider error codes of
``prism_core.provider_errors``.
"""

from __future__ import annotations

from . import plugin
from ._provider import FINISH_REASONS, PROVIDER_ID, OpenAIProvider, create_openai_provider
from ._request import PASS_THROUGH_OPTIONS, OpenAIRequestError

__all__ = (
    "FINISH_REASONS",
    "PASS_THROUGH_OPTIONS",
    "PROVIDER_ID",
    "OpenAIProvider",
    "OpenAIRequestError",
    "create_openai_provider",
    "plugin",
)
