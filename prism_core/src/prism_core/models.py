"""Model selection: which provider and which model a turn asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ("ModelConfig", "coerce_model")


@attrs.frozen
class ModelConfig:
    """A provider id and a model name, e.g. ``ModelConfig("mock", "demo")``."""

    provider: str
    model: str


def coerce_model(value: ModelConfig | Mapping[str, Any], *, where: str = "model") -> ModelConfig:
    """Accept a :class:`ModelConfig` or ``{"provider": ..., "model": ...}``; fail otherwise."""
    if isinstance(value, ModelConfig):
        return value
    if isinstance(value, Mapping):
        provider, model = value.get("provider"), value.get("model")
        if isinstance(provider, str) and provider and isinstance(model, str) and model:
            return ModelConfig(provider, model)
    raise TypeError(
        f"{where} must be ModelConfig(provider, model) or "
        f'{{"provider": str, "model": str}} with non-empty strings, got {value!r}'
    )
