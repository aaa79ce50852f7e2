"""Previewing a resume: what it would dispatch, run again or refuse, with nothing written.

:func:`preview_resume` runs the resume pipeline's steps up to the claim
(``plan_resume``): the same load, checks, session rebuild, decisions and in-doubt settlement
as the resume would make, with no restore hook, no ``on_session``, no claim and no mark of an
in-doubt call. It answers with the tool calls the resume would dispatch and the refusal it
would raise. A resume that ran right after it, with nothing changed in between, would do the
same; a tool's ``reconcile`` is not asked (it runs only after a claim), so a call it would
settle is reported in doubt and not as dispatched.

It reads; it must not write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..durable._checkpoints import reading_run_record
from ..durable._in_doubt import in_doubt_calls
from ..errors import PrismError
from ._checks import ResumeRequest, load_agent_run_state
from ._input import coerce_run_ref, validate_resume_input
from ._pipeline import plan_resume
from ._ports import ResumableAgent

__all__ = ("ResumePreview", "preview_resume")


@attrs.frozen(kw_only=True)
class ResumePreview:
    """What a resume would do.

    - ``would_dispatch``: the tool call ids it would run (approved calls, in-doubt calls
      cleared to run, the calls of a crashed round that never started), in run order;
    - ``would_repeat``: those of them already dispatched once that it would run again (in
      doubt and idempotent);
    - ``in_doubt``: the run's calls in doubt as stored (dispatched, with no result);
    - ``refusal``: the :class:`~prism_core.PrismError` the resume would raise, or ``None``.
    """

    would_dispatch: tuple[str, ...] = ()
    would_repeat: tuple[str, ...] = ()
    in_doubt: tuple[str, ...] = ()
    refusal: PrismError | None = None

    def to_json(self) -> dict[str, Any]:
        """The preview as a JSON object (the refusal as its ``code`` and ``message``)."""
        refusal = self.refusal
        return {
            "would_dispatch": list(self.would_dispatch),
            "would_repeat": list(self.would_repeat),
            "in_doubt": list(self.in_doubt),
            "refusal": None if refusal is None else {"code": refusal.code, "message": str(refusal)},
        }


async def preview_resume(
    agent: ResumableAgent,
    ref: Any,
    resume: Any,
    *,
    checkpoints: Any,
    definition_revision: str,
    ownership: Mapping[str, str] | None = None,
) -> ResumePreview:
    """What ``resume_agent_run(agent, ref, resume, ...)`` would do now, as a
    :class:`ResumePreview`; writes nothing and runs no tool, hook or model turn. A resume the
    pipeline would refuse (malformed input, an unknown or foreign run, a stale version, an
    in-doubt call nothing settles, …) is reported in ``refusal``, never raised."""
    in_doubt: tuple[str, ...] = ()
    try:
        plan = validate_resume_input(resume)
        request = ResumeRequest(
            checkpoints=checkpoints,
            definition_revision=definition_revision,
            ownership=ownership,
        )
        run_ref = coerce_run_ref(ref)
        with reading_run_record(run_ref.run_id):
            found = await load_agent_run_state(checkpoints, run_ref, ownership=ownership)
            if found is not None:
                in_doubt = in_doubt_calls(found.state)
            planned = await plan_resume(agent, run_ref, plan, request)
    except PrismError as exc:
        return ResumePreview(in_doubt=in_doubt, refusal=exc)
    claimed = planned.claimed
    if claimed is None:
        return ResumePreview(in_doubt=in_doubt)
    dispatch = [call.tool_call_id for call in claimed.pending_calls if call.status == "approved"]
    dispatch.extend(call.id for call in planned.fresh)
    repeat = {
        r.tool_call_id for r in planned.resolutions if r.source in ("idempotent", "sub_agent")
    }
    return ResumePreview(
        would_dispatch=tuple(dict.fromkeys(dispatch)),
        would_repeat=tuple(call_id for call_id in dispatch if call_id in repeat),
        in_doubt=in_doubt,
    )
