"""Model selection: which provider and which model a turn asks for."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ("ModelConfig", "coerce_model")

# A provider id is a short lower-case token (``openai``, ``anthropic``, ``my-llm``); the model
# name is everything after the first colon, since model names themselves hold colons
# (``ollama:llama3:8b``) and slashes (``openrouter:meta/llama-3``).
_PROVIDER_ID = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


@attrs.frozen
class ModelConfig:
    """A provider id and a model name, e.g. ``ModelConfig("mock", "demo")``."""

    provider: str
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelConfig:
        """Parse a model string ``"provider:model"``, e.g. ``"openai:gpt-4.1-mini"``.

        The provider id is the part before the first colon; the model name is the rest and
        may contain colons itself. Raises ``ValueError`` when either part is missing.
        """
        if not isinstance(text, str):
            raise TypeError(f"a model string must be a str, got {type(text).__name__}")
        provider, colon, model = text.partition(":")
        provider = provider.strip()
        model = model.strip()
        if not colon or not model or not _PROVIDER_ID.fullmatch(provider):
            shown = text if len(text) <= 80 else text[:80] + "…"
            raise ValueError(
                f"model string {shown!r} is not 'provider:model' "
                "(for example 'openai:gpt-4.1-mini' or 'anthropic:claude-sonnet-4-5'); "
                "the provider id is lower-case letters, digits, '-', '_' or '.'"
            )
        return cls(provider, model)


def coerce_model(
    value: ModelConfig | Mapping[str, Any] | str, *, where: str = "model"
) -> ModelConfig:
    """Accept a :class:`ModelConfig`, ``{"provider": …, "model": …}`` or ``"provider:model"``."""
    if isinstance(value, ModelConfig):
        return value
    if isinstance(value, str):
        try:
            return ModelConfig.parse(value)
        except ValueError as error:
            raise TypeError(f"{where}: {error}") from None
    if isinstance(value, Mapping):
        provider, model = value.get("provider"), value.get("model")
        if isinstance(provider, str) and provider and isinstance(model, str) and model:
            return ModelConfig(provider, model)
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:80] + "…"
    raise TypeError(
        f"{where} must be a 'provider:model' string, ModelConfig(provider, model) or "
        f'{{"provider": str, "model": str}} with non-empty strings, got {shown}'
    )
