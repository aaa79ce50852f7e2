"""Resolutions in resume input: an operator's word on tool calls left in doubt by a crash.

``{"expected_version": n, "decision": "continue", "resolutions": [...]}`` where each entry is
``{"tool_call_id": id, "outcome": "completed", "result": <json>}``,
``{"tool_call_id": id, "outcome": "not_started"}`` or
``{"tool_call_id": id, "outcome": "failed", "reason": str}``. Only the shape is checked here,
before any store access; whether each id names a call in doubt is checked against the stored
run (see ``_resume_doubt``). Messages name the field at fault, never its content.

It must not read the stored run or a store: it checks shape only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Literal, cast

import attrs

from ..codec import dumps, loads
from ..errors import AgentDecisionError

__all__ = (
    "MAX_RESOLUTION_REASON_BYTES",
    "MAX_RESOLUTION_RESULT_BYTES",
    "MAX_RESOLUTIONS",
    "Resolution",
    "ResolutionInputError",
    "parse_resolutions",
)

#: Most entries one ``resolutions`` list may carry.
MAX_RESOLUTIONS = 128
#: Largest ``result`` of a ``completed`` resolution, in bytes of canonical JSON (it rides the
#: claim write, so the run's state byte cap applies to it too).
MAX_RESOLUTION_RESULT_BYTES = 65536
#: Largest ``reason`` of a ``failed`` resolution, in UTF-8 bytes.
MAX_RESOLUTION_REASON_BYTES = 2048
_MAX_ID_CHARS = 256
_KEYS = ("tool_call_id", "outcome", "result", "reason")
_OUTCOMES = ("completed", "not_started", "failed")
_INVALID = "ERR_PRISM_DECISION_INVALID"
_LIMIT = "ERR_PRISM_DECISION_LIMIT"
_DUPLICATE = "ERR_PRISM_DECISION_DUPLICATE"


class ResolutionInputError(AgentDecisionError):
    """A malformed ``resolutions`` entry (raised by this module's parser)."""


@attrs.frozen(kw_only=True)
class Resolution:
    """An operator's resolution of one in-doubt call: ``completed`` (the effect happened;
    ``result`` is its result), ``not_started`` (run it again) or ``failed`` (``reason``)."""

    tool_call_id: str
    outcome: Literal["completed", "not_started", "failed"]
    result: Any = None
    reason: str | None = None


def _fail(message: str, code: str = _INVALID) -> ResolutionInputError:
    return ResolutionInputError(message, code=code)


def parse_resolutions(value: object) -> tuple[Resolution, ...]:
    """Check a ``resolutions`` list of any Python type; raises :class:`ResolutionInputError`."""
    if not isinstance(value, list | tuple):
        raise _fail("resolutions must be a list of resolution entries")
    if len(value) == 0:
        raise _fail("resolutions is empty; give at least one entry")
    if len(value) > MAX_RESOLUTIONS:
        raise _fail(f"resolutions has {len(value)} entries; the limit is {MAX_RESOLUTIONS}", _LIMIT)
    seen: dict[str, int] = {}
    parsed: list[Resolution] = []
    for index, entry in enumerate(list(itertools.islice(value, MAX_RESOLUTIONS))):
        resolution = _entry(entry, f"resolutions[{index}]")
        earlier = seen.setdefault(resolution.tool_call_id, index)
        if earlier != index:
            raise _fail(
                f"resolutions[{index}].tool_call_id repeats resolutions[{earlier}].tool_call_id; "
                "each call is resolved once",
                _DUPLICATE,
            )
        parsed.append(resolution)
    return tuple(parsed)


def _entry(value: object, where: str) -> Resolution:
    if isinstance(value, Resolution):
        fields: dict[str, object] = {
            "tool_call_id": value.tool_call_id,
            "outcome": value.outcome,
            "reason": value.reason,
        }
        if value.outcome == "completed":
            fields["result"] = value.result
    elif isinstance(value, Mapping):
        fields = {}
        for key in itertools.islice(value, len(_KEYS) + 1):
            if type(key) is not str or key not in _KEYS:
                raise _fail(f"{where} has an unknown key; the allowed keys are {', '.join(_KEYS)}")
            fields[key] = value[key]
    else:
        raise _fail(f"{where} must be a mapping with tool_call_id and outcome")
    call_id = fields.get("tool_call_id")
    if type(call_id) is not str or not call_id:
        raise _fail(f"{where}.tool_call_id must be a non-empty string")
    if len(call_id) > _MAX_ID_CHARS:
        raise _fail(f"{where}.tool_call_id is over {_MAX_ID_CHARS} characters", _LIMIT)
    outcome = fields.get("outcome")
    if type(outcome) is not str or outcome not in _OUTCOMES:
        raise _fail(f"{where}.outcome must be one of {', '.join(_OUTCOMES)}")
    reason = fields.get("reason")
    if outcome == "completed":
        if "result" not in fields:
            raise _fail(f"{where} resolves as completed and needs result (any JSON value)")
        if reason is not None:
            raise _fail(f"{where}.reason belongs to a failed resolution only")
        return Resolution(
            tool_call_id=call_id, outcome="completed", result=_json(fields["result"], where)
        )
    if "result" in fields:
        raise _fail(f"{where}.result belongs to a completed resolution only")
    if outcome == "not_started":
        if reason is not None:
            raise _fail(f"{where}.reason belongs to a failed resolution only")
        return Resolution(tool_call_id=call_id, outcome="not_started")
    if type(reason) is not str or not reason:
        raise _fail(f"{where} resolves as failed and needs reason (a non-empty string)")
    try:
        size = len(reason.encode("utf-8"))
    except UnicodeEncodeError:
        raise _fail(f"{where}.reason is not valid Unicode text") from None
    if size > MAX_RESOLUTION_REASON_BYTES:
        raise _fail(
            f"{where}.reason is {size} bytes; the limit is {MAX_RESOLUTION_REASON_BYTES}", _LIMIT
        )
    return Resolution(tool_call_id=call_id, outcome="failed", reason=reason)


def _json(value: object, where: str) -> Any:
    """A detached copy of ``value`` through its canonical JSON, within the size cap."""
    try:
        blob = dumps(value)
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        raise _fail(f"{where}.result is not JSON-serialisable") from None
    if len(blob) > MAX_RESOLUTION_RESULT_BYTES:
        raise _fail(
            f"{where}.result is {len(blob)} bytes of canonical JSON; the limit is "
            f"{MAX_RESOLUTION_RESULT_BYTES}",
            _LIMIT,
        )
    return cast(Any, loads(blob))
