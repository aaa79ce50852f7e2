"""What an elicitation tool asks for one call: the schema, the reason and the answer check.

A tool's ``elicitation`` is a JSON schema, or a function of the call's arguments returning
``{"schema": …, "reason"?: str, "validate"?: callable}``. The function answers synchronously;
one that raises, answers ``None`` or answers something unusable (not a mapping, no valid
schema, a schema over ``MAX_ELICITATION_SCHEMA_BYTES``, an awaitable) asks for no elicitation,
and the call is approved like any other tool instead. A reason over
``MAX_ELICITATION_REASON_BYTES`` is left out. It must not run the tool or write anything.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .codec import dumps
from .errors import PrismError
from .schema import CompiledSchema, compile_json_schema

__all__ = (
    "MAX_ELICITATION_REASON_BYTES",
    "MAX_ELICITATION_SCHEMA_BYTES",
    "ElicitationRequest",
    "elicitation_request",
)

#: The largest schema an elicitation function may ask with (canonical JSON bytes).
MAX_ELICITATION_SCHEMA_BYTES = 16384
#: The longest reason it may give (UTF-8 bytes).
MAX_ELICITATION_REASON_BYTES = 2048

logger = logging.getLogger(__package__ or __name__)


@attrs.frozen(kw_only=True)
class ElicitationRequest:
    """One call's elicitation: the answer's ``schema``, an optional ``reason`` and an optional
    ``validate(answer)`` host check (it raises, or returns a problem, for a bad answer)."""

    schema: Mapping[str, Any]
    compiled: CompiledSchema = attrs.field(eq=False, repr=False)
    reason: str | None = None
    validate: Callable[[Any], Any] | None = attrs.field(default=None, eq=False, repr=False)

    def problem(self, answer: Any) -> str | None:
        """What is wrong with ``answer`` (schema first, then ``validate``), or ``None``."""
        problem = self.compiled.problem(answer)
        if problem is not None or self.validate is None:
            return problem
        try:
            verdict = self.validate(answer)
        except Exception as exc:
            return f"the tool's elicitation check refused it ({type(exc).__name__})"
        if verdict is None or verdict is True:
            return None
        return getattr(verdict, "message", None) or str(verdict)


def elicitation_request(tool: Any, arguments: Mapping[str, Any]) -> ElicitationRequest | None:
    """The elicitation ``tool`` asks for this call, or ``None`` (no elicitation: approve it)."""
    spec = getattr(tool, "elicitation", None)
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return ElicitationRequest(schema=spec, compiled=_compiled(spec, tool))
    try:
        answer = spec(dict(arguments))
    except Exception as exc:
        logger.warning(
            "tool %s: its elicitation function raised %s; the call is approved instead",
            getattr(tool, "name", "?"),
            type(exc).__name__,
        )
        return None
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()
        return None
    if not isinstance(answer, Mapping):
        return None
    schema = answer.get("schema")
    if not isinstance(schema, Mapping):
        return None
    try:
        if len(dumps(dict(schema))) > MAX_ELICITATION_SCHEMA_BYTES:
            return None
        compiled = _compiled(schema, tool)
    except (PrismError, TypeError, ValueError):
        return None
    reason = answer.get("reason")
    if not isinstance(reason, str) or len(reason.encode("utf-8")) > MAX_ELICITATION_REASON_BYTES:
        reason = None
    validate = answer.get("validate")
    return ElicitationRequest(
        schema=dict(schema),
        compiled=compiled,
        reason=reason or None,
        validate=validate if callable(validate) else None,
    )


def _compiled(schema: Mapping[str, Any], tool: Any) -> CompiledSchema:
    return compile_json_schema(schema, where=f"tool {getattr(tool, 'name', '?')!r} elicitation")
