"""Guardrails: typed, fail-closed checks at the input, output, tool-input and tool-output stages.

It only re-exports the public names of ``guardrails/``; it must not hold behaviour.
"""

from ._decisions import (
    GUARDRAIL_ACTIONS,
    GUARDRAIL_STAGES,
    GuardrailAction,
    GuardrailDecision,
    GuardrailRecord,
    GuardrailStage,
)
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
from ._pack_model import (
    MAX_GUARDRAIL_PACKS,
    MAX_PACK_ARG_PATHS,
    MAX_PACK_ID_BYTES,
    MAX_PACK_JSON_BYTES,
    MAX_PACK_PATTERN_BYTES,
    MAX_PACK_REASON_BYTES,
    MAX_PACK_REFUSAL_BYTES,
    MAX_PACK_RULES,
    MAX_PACK_TOOLS,
    PACK_RULE_ACTIONS,
    GuardrailPack,
    PackRule,
    PackRuleAction,
    PackRuleContext,
    PackStateCodec,
)
from ._pack_state import (
    CompiledGuardrailPacks,
    ask_decision_reason,
    pack_refusal_message,
    pack_rule_of,
    rule_reason,
)
from ._packs import (
    compile_guardrail_packs,
    pack_catalogue,
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
    "MAX_GUARDRAIL_PACKS",
    "MAX_PACK_ARG_PATHS",
    "MAX_PACK_ID_BYTES",
    "MAX_PACK_JSON_BYTES",
    "MAX_PACK_PATTERN_BYTES",
    "MAX_PACK_REASON_BYTES",
    "MAX_PACK_REFUSAL_BYTES",
    "MAX_PACK_RULES",
    "MAX_PACK_TOOLS",
    "PACK_RULE_ACTIONS",
    "CompiledGuardrailPacks",
    "GuardrailPack",
    "PackRule",
    "PackRuleAction",
    "PackRuleContext",
    "PackStateCodec",
    "compile_guardrail_packs",
    "pack_catalogue",
    "ask_decision_reason",
    "pack_refusal_message",
    "pack_rule_of",
    "rule_reason",
)
