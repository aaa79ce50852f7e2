"""Exact-match secret redaction for provider requests, events, stored entries and checkpoints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs

__all__ = ("REDACTED", "Redactor", "SecretRedactor", "create_secret_redactor", "redact_value")

REDACTED = "[REDACTED]"
T = TypeVar("T")


@runtime_checkable
class Redactor(Protocol):
    """Anything that can redact a string."""

    def redact_text(self, text: str) -> str:
        """Return ``text`` with every known secret replaced."""
        ...


@attrs.frozen
class SecretRedactor:
    """Replaces each known secret string with ``"[REDACTED]"`` (longest secrets first)."""

    secrets: tuple[str, ...]

    def redact_text(self, text: str) -> str:
        """Return ``text`` with every known secret replaced by ``[REDACTED]``."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def redact(self, value: T) -> T:
        """Redact every string inside ``value`` (attrs values, mappings, sequences)."""
        return redact_value(value, self)

    def merged(self, other: Redactor | None) -> Redactor:
        """A redactor that applies this one and then ``other``."""
        return _ChainRedactor((self, other)) if other is not None else self


@attrs.frozen
class _ChainRedactor:
    parts: tuple[Redactor, ...]

    def redact_text(self, text: str) -> str:
        for part in self.parts:
            text = part.redact_text(text)
        return text


def create_secret_redactor(secrets: Iterable[str]) -> SecretRedactor:
    """A redactor for the exact ``secrets`` given (empty strings are ignored)."""
    if isinstance(secrets, str):
        raise TypeError("create_secret_redactor expects an iterable of strings, not one string")
    values = []
    for secret in secrets:
        if not isinstance(secret, str):
            raise TypeError(f"secrets must be strings, got {type(secret).__name__}")
        if secret:
            values.append(secret)
    ordered = tuple(sorted(set(values), key=lambda s: (-len(s), s)))
    return SecretRedactor(ordered)


def chain_redactors(*redactors: Redactor | None) -> Redactor | None:
    """Combine redactors (``None`` entries are skipped); ``None`` when there are none."""
    parts = tuple(r for r in redactors if r is not None)
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return _ChainRedactor(parts)


def redact_value(value: T, redactor: Redactor | None) -> T:
    """Return ``value`` with every string redacted; attrs values are rebuilt, not mutated."""
    if redactor is None:
        return value
    return _redact(value, redactor)  # type: ignore[no-any-return]


def _redact(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if attrs.has(type(value)):
        changes = {}
        for field in attrs.fields(type(value)):
            if not field.init:
                continue
            old = getattr(value, field.name)
            new = _redact(old, redactor)
            if new is not old:
                changes[field.name.lstrip("_")] = new
        return attrs.evolve(value, **changes) if changes else value
    if isinstance(value, Mapping):
        return {_redact(k, redactor): _redact(v, redactor) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_redact(v, redactor) for v in value)
    if isinstance(value, list):
        return [_redact(v, redactor) for v in value]
    return value
