"""The bottom of the error hierarchy, importable by the lowest rooms (the codec) without a cycle.

``prism_core.errors`` re-exports both names; hosts import them from there or the package root.
"""

from __future__ import annotations

__all__ = ("CanonicalJsonError", "PrismError")


class PrismError(Exception):
    """Base class of every error Prism raises; ``code`` is stable across releases."""

    code: str = "ERR_PRISM"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """The human-readable message (the first argument)."""
        return str(self.args[0]) if self.args else ""


class CanonicalJsonError(PrismError, ValueError, TypeError):
    """A value has no canonical JSON form: NaN or infinity, a cycle, nesting too deep to
    encode, a string with a lone surrogate (not UTF-8), or an object JSON cannot carry.

    It is also a ``ValueError`` and a ``TypeError``, the errors ``json`` raises for these.
    """

    code = "ERR_PRISM_JSON_INVALID"
