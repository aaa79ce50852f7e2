"""Reading a request: a bounded JSON body (:func:`prism_web.read_json_object`), validated as an
AG-UI ``RunAgentInput``.

Only the last user message of ``messages`` is read: the thread's history lives in the
session store, so the frontend's copy of it (and any system or developer message it sends)
never reaches the model. The frontend's ``tools``, ``context``, ``state`` and
``forwardedProps`` are not offered to the agent either.
"""

from __future__ import annotations

import pydantic
from ag_ui.core import RunAgentInput, TextPart, UserMessage
from starlette.requests import Request

from prism_web import BadRequest, read_json_object

from ._errors import InputRefused

__all__ = ("read_run_input", "user_text")


async def read_run_input(request: Request, limit: int) -> RunAgentInput:
    """The request's ``RunAgentInput``; the web layer's refusals (415, 413, 400), and
    :class:`BadRequest` for an object that is not a run input."""
    data = await read_json_object(request, limit)
    try:
        return RunAgentInput.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise BadRequest(f"the body is not an AG-UI RunAgentInput: {problems}") from None


def user_text(run_input: RunAgentInput) -> str:
    """The text of the input's last user message (its text parts, joined).

    :class:`InputRefused` when there is none, or when that message carries media parts.
    """
    last = next(
        (m for m in reversed(run_input.messages) if isinstance(m, UserMessage)),
        None,
    )
    if last is None:
        raise InputRefused("the input has no user message to run")
    if isinstance(last.content, str):
        text = last.content
    else:
        if not all(isinstance(part, TextPart) for part in last.content):
            raise InputRefused("this agent takes text only; the user message has other parts")
        text = "".join(part.text for part in last.content if isinstance(part, TextPart))
    if not text.strip():
        raise InputRefused("the user message is empty")
    return text
