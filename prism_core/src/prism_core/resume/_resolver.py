"""Calling the host's ``resolve_agent``: with the run's recorded revision when it takes one.

A ``resolve_agent`` whose signature accepts a keyword ``revision`` (or any keyword) is called
as ``resolve_agent(agent_id, revision=<the run's recorded revision>)``, so a host can keep
serving runs written by an older definition with that definition; one that takes only
``agent_id`` is called as ``resolve_agent(agent_id)``. The signature is inspected once per
callable. Sync and async hosts alike: an awaitable answer is awaited.

It must not interpret the answer: the lifecycle and the plugins unpack it.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ("accepts_revision", "call_resolve_agent")

_SEEN: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _inspect(resolve_agent: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(resolve_agent).parameters.values()
    except (TypeError, ValueError):  # a builtin or an object without a readable signature
        return False
    return any(
        (p.name == "revision" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        or p.kind is p.VAR_KEYWORD
        for p in parameters
    )


def accepts_revision(resolve_agent: Callable[..., Any]) -> bool:
    """Whether ``resolve_agent`` takes a keyword ``revision`` (its signature read once)."""
    # Bound methods are made anew at each attribute access: key them by their function.
    key = getattr(resolve_agent, "__func__", resolve_agent)
    try:
        return _SEEN[key]
    except KeyError:
        pass
    except TypeError:  # not weakly referenceable: inspect each time
        return _inspect(resolve_agent)
    found = _SEEN[key] = _inspect(resolve_agent)
    return found


async def call_resolve_agent(
    resolve_agent: Callable[..., Any], agent_id: str, *, revision: str | None = None
) -> Any:
    """``resolve_agent(agent_id, revision=revision)`` when it takes a keyword ``revision``
    and ``revision`` is given, else ``resolve_agent(agent_id)``; awaited when it answers with
    an awaitable. Returns the host's answer as it is."""
    if revision is not None and accepts_revision(resolve_agent):
        answer = resolve_agent(agent_id, revision=revision)
    else:
        answer = resolve_agent(agent_id)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer
