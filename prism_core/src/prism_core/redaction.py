"""Exact-match secret redaction for provider requests, events, stored entries and checkpoints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs

__all__ = (
    "REDACTED",
    "Redactor",
    "SecretRedactor",
    "StreamRedaction",
    "create_secret_redactor",
    "redact_value",
)

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

    @property
    def secrets(self) -> tuple[str, ...] | None:
        """Every part's secrets (``None`` when a part does not say what it redacts)."""
        found: list[str] = []
        for part in self.parts:
            known = _known_secrets(part)
            if known is None:
                return None
            found.extend(known)
        return tuple(found)


def _known_secrets(redactor: Redactor) -> tuple[str, ...] | None:
    """The exact strings ``redactor`` replaces, when it says (a ``secrets`` attribute of
    strings); ``None`` for a redactor that does not."""
    secrets = getattr(redactor, "secrets", None)
    if secrets is None or isinstance(secrets, str):
        return None
    try:
        values = tuple(secrets)
    except TypeError:
        return None
    return values if all(isinstance(value, str) for value in values) else None


class StreamRedaction:
    """Redacts one stream of text that arrives in pieces (a message's text deltas).

    Each piece is redacted alone by the plain redactor, so a secret split over two pieces
    would reach an observer whole. :meth:`feed` therefore holds back the tail that could
    still be the start of a secret (at most the longest secret's length minus one
    characters) and never cuts through a secret it can already see, so no prefix of what it
    has released holds a secret; :meth:`flush` releases the rest when the stream ends. A
    redactor that does not say which strings it redacts (no ``secrets`` attribute) holds the
    whole text back until the end: its stream is not incremental, but nothing leaks.
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self._redactor = redactor
        secrets = _known_secrets(redactor) if redactor is not None else ()
        self._secrets = secrets
        self._hold = None if secrets is None else max((len(s) for s in secrets), default=1) - 1
        self._raw = ""
        self._released = 0

    def feed(self, piece: str) -> str:
        """Take the next ``piece``; return the redacted text that is now safe to show."""
        if self._redactor is None:
            return piece
        self._raw += piece
        return self._release(self._safe_cut())

    def flush(self) -> str:
        """The end of the stream: the redacted rest of the text."""
        if self._redactor is None:
            return ""
        return self._release(len(self._raw))

    def _release(self, cut: int) -> str:
        assert self._redactor is not None
        if cut <= self._released:
            return ""
        text = self._redactor.redact_text(self._raw[self._released : cut])
        self._released = cut
        return text

    def _safe_cut(self) -> int:
        """The furthest point that no secret can span, now or once more text arrives.

        Text more than ``hold`` characters back cannot start a secret that is still to come,
        so the cut starts there. Secrets already whole in the text that span the cut (with
        those they overlap) move it to their end when redacting them leaves none of their
        characters (they are released redacted), and back to their start otherwise: no
        occurrence of a secret ever spans a cut, so each released piece is redacted on its
        own and no prefix of the output holds a secret.
        """
        if self._hold is None:
            return self._released
        assert self._secrets is not None
        raw = self._raw
        cut = len(raw) - self._hold
        if cut <= self._released:
            return self._released
        found = self._occurrences()
        while True:
            spanning = next(((a, b) for a, b in found if a < cut < b), None)
            if spanning is None:
                return max(cut, self._released)
            # The secrets overlapping the one across the cut, transitively: release them
            # whole, redacted together, or hold them all back.
            start, end = spanning
            grown = True
            while grown:
                grown = False
                for a, b in found:
                    if a < end and start < b and (a < start or b > end):
                        start, end, grown = min(start, a), max(end, b), True
            if self._wholly_replaced(raw[start:end]):
                # Every character of the group is redacted away, so a secret still to come
                # cannot begin inside it.
                return end
            cut = start

    def _wholly_replaced(self, text: str) -> bool:
        assert self._redactor is not None
        return not self._redactor.redact_text(text).replace(REDACTED, "")

    def _occurrences(self) -> list[tuple[int, int]]:
        """Every occurrence (start, end) of a secret in the unreleased text, overlaps too."""
        assert self._secrets is not None
        raw, found = self._raw, []
        for secret in self._secrets:
            start = raw.find(secret, self._released)
            while start != -1:
                found.append((start, start + len(secret)))
                start = raw.find(secret, start + 1)
        return sorted(found)


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
