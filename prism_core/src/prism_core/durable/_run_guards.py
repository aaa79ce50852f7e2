"""Run guardrail identity: how a run's own guards are recorded in its checkpoint and matched
again on resume.

A run's own guards (``guardrails=`` on ``run``) are callables no checkpoint can hold. A
durable run records each one's identity instead (stage, name, revision, in enforcement order);
a resume must be handed guards with exactly those identities (``guardrails=``), or it is
refused with :data:`RUN_GUARDRAILS_CODE` before anything is claimed, so a resumed run never
enforces less than the run it continues. A resume handed guards for a run that recorded none
is refused too: the approver decided on a run without them.

It must not evaluate guards, read or write a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._echo import echo
from ..errors import AgentRunStateError
from ..guardrails import GuardrailConfig, coerce_guardrails
from ..redaction import Redactor, redact_value
from ._state import MAX_RUN_GUARDRAIL_CHARS, MAX_RUN_GUARDRAILS, RunGuardrailRecord

__all__ = (
    "RUN_GUARDRAILS_CODE",
    "coerce_resume_guardrails",
    "match_run_guardrails",
    "run_guardrail_identities",
)

#: The code of every refusal about a run's own guardrails on a durable run or its resume.
RUN_GUARDRAILS_CODE = "ERR_PRISM_RUN_GUARDRAILS"

#: Most guard names one refusal message lists.
_MAX_NAMED = 8


def _refuse(message: str) -> AgentRunStateError:
    return AgentRunStateError(message, code=RUN_GUARDRAILS_CODE)


def coerce_resume_guardrails(value: Any) -> GuardrailConfig | None:
    """The ``guardrails=`` of a resume as a config (``None`` when absent or empty).

    Raises :class:`~prism_core.AgentRunStateError` (:data:`RUN_GUARDRAILS_CODE`) for a value
    the run option would refuse."""
    if value is None:
        return None
    try:
        config = coerce_guardrails(value)
    except (TypeError, ValueError) as exc:
        raise _refuse(f"guardrails on resume: {exc}") from exc
    return config if config.all() else None


def run_guardrail_identities(config: GuardrailConfig) -> tuple[RunGuardrailRecord, ...] | None:
    """The identities a checkpoint records for ``config``, stage by stage in declaration
    order; ``None`` when it has no guard.

    Raises :class:`~prism_core.AgentRunStateError` (:data:`RUN_GUARDRAILS_CODE`) when they
    exceed the checkpoint's bounds."""
    guards = config.all()
    if not guards:
        return None
    if len(guards) > MAX_RUN_GUARDRAILS:
        raise _refuse(
            f"a durable run records at most {MAX_RUN_GUARDRAILS} guardrails of its own, "
            f"got {len(guards)}"
        )
    rows: list[RunGuardrailRecord] = []
    for guard in guards:
        for value in (guard.name, guard.revision):
            if value is not None and not 1 <= len(value) <= MAX_RUN_GUARDRAIL_CHARS:
                raise _refuse(
                    f"a durable run's guardrail names and revisions must be "
                    f"1..{MAX_RUN_GUARDRAIL_CHARS} characters"
                )
        rows.append(RunGuardrailRecord(stage=guard.stage, name=guard.name, revision=guard.revision))
    return tuple(rows)


def _label(row: RunGuardrailRecord) -> str:
    revision = f"@{row.revision}" if row.revision is not None else ""
    return f"{row.stage}:{row.name}{revision}"


def _names(rows: Sequence[RunGuardrailRecord]) -> str:
    labels = [_label(row) for row in rows[:_MAX_NAMED]]
    more = f" and {len(rows) - _MAX_NAMED} more" if len(rows) > _MAX_NAMED else ""
    return echo(labels, 600) + more


def match_run_guardrails(
    recorded: tuple[RunGuardrailRecord, ...] | None,
    supplied: GuardrailConfig | None,
    redactor: Redactor | None,
) -> None:
    """Refuse unless ``supplied`` has exactly the ``recorded`` identities, in order.

    The recorded identities were redacted with the state, so the supplied ones are compared
    after the same redaction. Raises :class:`~prism_core.AgentRunStateError`
    (:data:`RUN_GUARDRAILS_CODE`) naming the missing and unexpected guards (at most eight of
    each)."""
    if not recorded:
        if supplied is not None:
            raise _refuse(
                "guardrails were supplied but the checkpoint records no run guardrails: a "
                "resume must enforce what the run it continues enforced"
            )
        return
    given = run_guardrail_identities(supplied) if supplied is not None else None
    if given is not None:
        given = tuple(
            RunGuardrailRecord(**row)
            for row in redact_value([_plain(row) for row in given], redactor)
        )
    if given == recorded:
        return
    if given is None:
        raise _refuse(
            f"the run recorded guardrails {_names(recorded)}; they must be supplied again on "
            "resume (guardrails=...) with the same stage, name and revision. A resume that "
            "cannot hand over callables (prism runs, a worker task) cannot continue this run"
        )
    missing = [row for row in recorded if row not in given]
    unexpected = [row for row in given if row not in recorded]
    if not missing and not unexpected:
        raise _refuse(
            f"guardrails were supplied in another order than the run recorded them: "
            f"{_names(recorded)}"
        )
    parts = []
    if missing:
        parts.append(f"missing {_names(missing)}")
    if unexpected:
        parts.append(f"unexpected {_names(unexpected)}")
    raise _refuse(
        f"the supplied guardrails do not match the ones the run recorded: {'; '.join(parts)}"
    )


def _plain(row: RunGuardrailRecord) -> dict[str, Any]:
    return {"stage": row.stage, "name": row.name, "revision": row.revision}
