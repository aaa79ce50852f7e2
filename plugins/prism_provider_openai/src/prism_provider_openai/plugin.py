"""The plugin object of ``prism-runtime-openai``: it answers ``prism_provider`` for ``openai``."""

from __future__ import annotations

from typing import Any

from prism_core.hookspecs import hookimpl

from ._provider import PROVIDER_ID, OpenAIProvider, create_openai_provider

__all__ = ("prism_provider",)


@hookimpl
def prism_provider(model: Any) -> OpenAIProvider | None:
    """A provider configured from the environment for ``model.provider == "openai"``."""
    if getattr(model, "provider", None) != PROVIDER_ID:
        return None
    return create_openai_provider()
