"""Reading a request: a bounded JSON body, validated as an AG-UI ``RunAgentInput``.

Only the last user message of ``messages`` is read: the thread's history lives in the
session store, so the frontend's copy of it (and any system or developer message it sends)
never reaches the model. The frontend's ``tools``, ``context``, ``state`` and
``forwardedProps`` are not offered to the agent either.
"""

from __future__ import annotations

import json

import pydantic
from ag_ui.core import RunAgentInput, TextPart, UserMessage
from starlette.requests import Request

from ._errors import BadRequest, InputRefused, PayloadTooLarge, UnsupportedMediaType

__all__ = ("read_run_input", "user_text")

JSON_MEDIA_TYPE = "application/json"


def _require_json(request: Request) -> None:
    # A cross-site HTML form cannot send this type without a CORS preflight the app never
    # grants, so requiring it closes the endpoint to forged form posts.
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType(
            f"the body must be sent as Content-Type: {JSON_MEDIA_TYPE}"
            + (f", got {media_type[:60]!r}" if media_type else "")
        )


async def _read_bounded(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    return bytes(body)


async def read_run_input(request: Request, limit: int) -> RunAgentInput:
    """The request's ``RunAgentInput``; :class:`BadRequest` for anything else."""
    _require_json(request)
    body = await _read_bounded(request, limit)
    try:
        data = json.loads(body)
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
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
