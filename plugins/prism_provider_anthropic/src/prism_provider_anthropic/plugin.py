"""The plugin object of ``prism-runtime-anthropic``: it answers ``prism_provider`` for Anthropic."""

from __future__ import annotations

from typing import Any

from prism_core.hookspecs import hookimpl

from ._provider import AnthropicProvider, create_anthropic_provider

__all__ = ("prism_provider",)


@hookimpl
def prism_provider(model: Any) -> AnthropicProvider | None:
    """A provider configured from the environment for ``model.provider == "anthropic"``.

    Nothing closes a provider a hook hands to a run, so this one opens its SDK client per
    turn and closes it when the turn ends.
    """
    if getattr(model, "provider", None) != "anthropic":
        return None
    return create_anthropic_provider(reuse_connections=False)
