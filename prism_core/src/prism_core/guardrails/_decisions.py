"""Guardrail stages, decisions and the records every evaluated guard leaves.

Plain data: it must not evaluate a guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..codec import converter

__all__ = (
    "GUARDRAIL_ACTIONS",
    "GUARDRAIL_STAGES",
    "GuardrailAction",
    "GuardrailDecision",
    "GuardrailRecord",
    "GuardrailStage",
)

GuardrailStage: TypeAlias = Literal["input", "output", "tool_input", "tool_output"]
GuardrailAction: TypeAlias = Literal["allow", "block", "tripwire", "interrupt"]
GUARDRAIL_STAGES: tuple[GuardrailStage, ...] = ("input", "output", "tool_input", "tool_output")
GUARDRAIL_ACTIONS: tuple[GuardrailAction, ...] = ("allow", "block", "tripwire", "interrupt")


@attrs.frozen
class GuardrailDecision:
    """What a guard decided: an action, an optional reason and JSON metadata."""

    action: GuardrailAction
    reason: str | None = None
    metadata: Mapping[str, Any] | None = None


@attrs.frozen
class GuardrailRecord:
    """One evaluated guard: its name, stage, action and (redacted, bounded) reason/metadata.

    ``exception`` is what the guard raised when it failed (``reason="guardrail_failed"``);
    it stays in the process: events, stores and checkpoints never carry it.
    """

    guardrail: str
    stage: GuardrailStage
    action: GuardrailAction
    reason: str | None = None
    metadata: Mapping[str, Any] | None = None
    exception: BaseException | None = attrs.field(default=None, kw_only=True, eq=False, repr=False)


converter().register_unstructure_hook(
    GuardrailRecord,
    make_dict_unstructure_fn(GuardrailRecord, converter(), exception=override(omit=True)),
)
converter().register_structure_hook(
    GuardrailRecord,
    make_dict_structure_fn(GuardrailRecord, converter(), exception=override(omit=True)),
)
