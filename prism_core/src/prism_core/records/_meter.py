"""The context meter: how full the latest provider turn's input was.

It is a value; it must not read the session or a store.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ("ContextMeter",)


@attrs.frozen(kw_only=True)
class ContextMeter:
    """The latest provider turn's input tokens.

    ``source`` is ``"reported"`` when the provider reported usage, ``"estimate"`` when Prism
    estimated it (about four characters per token of the request), and ``"none"`` before any
    turn. ``cap`` is the configured context window, ``budget`` the tokens left under it and
    ``ratio`` the used fraction.
    """

    input_tokens: int | None
    source: Literal["reported", "estimate", "none"]
    cap: int | None = None
    budget: int | None = None
    ratio: float | None = None

    @property
    def estimated(self) -> bool:
        """Whether ``input_tokens`` is an estimate."""
        return self.source == "estimate"

    @classmethod
    def measure(cls, input_tokens: int | None, source: str, cap: int | None) -> ContextMeter:
        """Build a meter, deriving ``budget`` and ``ratio`` from ``cap``."""
        if input_tokens is None:
            return cls(input_tokens=None, source="none", cap=cap)
        budget = cap - input_tokens if cap is not None else None
        ratio = input_tokens / cap if cap else None
        kind: Literal["reported", "estimate"] = "reported" if source == "reported" else "estimate"
        return cls(input_tokens=input_tokens, source=kind, cap=cap, budget=budget, ratio=ratio)
