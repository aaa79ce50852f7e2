"""The Anthropic provider for Prism: the Messages API over the official ``anthropic`` SDK.

Compose it explicitly with ``create_agent(model="anthropic:claude-sonnet-4-5",
plugins=[prism_provider_anthropic.plugin])`` (the plugin answers ``model.provider ==
"anthropic"`` with a provider that reads ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``), or
build one with :func:`create_anthropic_provider` and pass it as ``provider=``.
"""

from __future__ import annotations

from . import plugin
from ._errors import error_info
from ._provider import AnthropicProvider, create_anthropic_provider
from ._request import (
    DEFAULT_MAX_TOKENS,
    THINKING_BUDGETS,
    AnthropicRequestError,
    build_create_params,
)
from ._stream import FINISH_REASONS

__all__ = (
    "DEFAULT_MAX_TOKENS",
    "FINISH_REASONS",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "AnthropicRequestError",
    "build_create_params",
    "create_anthropic_provider",
    "error_info",
    "plugin",
)
