"""Guardrails: typed, fail-closed checks at the input, output, tool-input and tool-output stages."""

from ._engine import (
    MAX_GUARDRAIL_METADATA_BYTES,
    MAX_GUARDRAIL_REASON_BYTES,
    Guardrail,
    GuardrailConfig,
    GuardrailContext,
    coerce_guardrails,
    evaluate_guardrails,
    first_decisive,
)
from ._decisions import (
    GUARDRAIL_ACTIONS,
    GUARDRAIL_STAGES,
    GuardrailAction,
    GuardrailDecision,
    GuardrailRecord,
    GuardrailStage,
)

__all__ = (
    "GUARDRAIL_ACTIONS",
    "GUARDRAIL_STAGES",
    "MAX_GUARDRAIL_METADATA_BYTES",
    "MAX_GUARDRAIL_REASON_BYTES",
    "Guardrail",
    "GuardrailConfig",
    "GuardrailContext",
    "coerce_guardrails",
    "evaluate_guardrails",
    "first_decisive",
    "GuardrailAction",
    "GuardrailDecision",
    "GuardrailRecord",
    "GuardrailStage",
)
