"""Loop strategies: what a run does around its provider turns.

A strategy has a ``name``, a ``revision`` and ``run(context)``, an async generator of events
that drives provider turns through ``context.run_turns()``. Strategies that carry loop-local
state across a suspension or a crash declare ``snapshot()``/``restore(snapshot)``.

A strategy must not reach the session or the provider except through its context.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing
from typing import Any

import attrs

from .._run_values import AgentLoopStrategy, LoopContext
from ..content import Message
from ..errors import PrismError
from ._options import InvalidOptionsError

__all__ = (
    "AgentLoopStrategy",
    "GenerateValidateReviseLoop",
    "LoopContext",
    "SingleShotLoop",
    "coerce_loop",
    "loop_is_durable",
)


@attrs.frozen
class SingleShotLoop:
    """The default: provider turns until the provider returns no tool calls."""

    name: str = "single-shot"
    revision: str = "1"

    async def run(self, context: LoopContext) -> AsyncIterator[Any]:
        """Run provider turns until the provider stops calling tools."""
        async with aclosing(context.run_turns()) as turns:
            async for event in turns:
                yield event


@attrs.define
class GenerateValidateReviseLoop:
    """Generate, check the answer with ``validate(text) -> None | str``, and ask for a revision
    with ``revise(text, problem) -> str`` (the next user message) up to ``max_revisions`` times.
    Both callbacks may be sync or async. The run fails when the last revision is still invalid.

    Its loop-local state (``snapshot()``) is ``attempts``, the answers validated so far, and
    ``revisions``, the revisions asked for; both survive a suspension or a crash.
    """

    validate: Callable[[str], Any]
    revise: Callable[[str, str], Any] | None = None
    max_revisions: int = 2
    name: str = "generate-validate-revise"
    revision: str = "1"
    revisions: int = attrs.field(default=0, init=False)
    attempts: int = attrs.field(default=0, init=False)

    async def run(self, context: LoopContext) -> AsyncIterator[Any]:
        """Generate, validate, and revise until valid or out of revisions."""
        while True:
            async with aclosing(context.run_turns()) as turns:
                async for event in turns:
                    yield event
            text = context.last_message.text if context.last_message is not None else ""
            problem = await _maybe_await(self.validate(text))
            self.attempts += 1
            if problem is None:
                return
            if self.revisions >= self.max_revisions:
                raise PrismError(
                    f"Output still invalid after {self.revisions} revision(s): {problem}",
                    code="ERR_PRISM_LOOP_VALIDATION",
                )
            self.revisions += 1
            if self.revise is not None:
                feedback = await _maybe_await(self.revise(text, str(problem)))
            else:
                feedback = f"Your previous answer was invalid: {problem}. Please revise it."
            await context.add_user_message(Message.user(str(feedback)))

    def new_run(self) -> GenerateValidateReviseLoop:
        """A copy with fresh loop-local state, so runs never share a revision count."""
        return GenerateValidateReviseLoop(
            self.validate, self.revise, self.max_revisions, self.name, self.revision
        )

    def snapshot(self) -> dict[str, Any]:
        """Loop-local state: how many answers were validated and revisions asked for."""
        return {"attempts": self.attempts, "revisions": self.revisions}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Reinstate a :meth:`snapshot`. One written before ``attempts`` was recorded counts an
        attempt per revision (each revision followed an invalid answer)."""
        self.revisions = int(snapshot.get("revisions", 0))
        self.attempts = int(snapshot.get("attempts", self.revisions))


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def coerce_loop(value: Any, catalogue: Mapping[str, Any] | None = None) -> Any:
    """A loop strategy from ``None`` (single-shot), a strategy object, or a name known to
    ``catalogue`` (built-ins and plugin strategies)."""
    if value is None:
        return SingleShotLoop()
    if isinstance(value, str):
        if catalogue is not None and value in catalogue:
            return catalogue[value]
        if value == "single-shot":
            return SingleShotLoop()
        known = sorted({"single-shot", *(catalogue or {})})
        raise InvalidOptionsError(f"Unknown loop strategy {value!r}; known: {known}")
    if not (hasattr(value, "run") and isinstance(getattr(value, "name", None), str)):
        raise TypeError("loop must be a loop strategy (name, revision, run) or a strategy name")
    return value


def loop_is_durable(loop: Any) -> bool:
    """Built-in loops and loops declaring both ``snapshot`` and ``restore`` are durable."""
    if isinstance(loop, SingleShotLoop | GenerateValidateReviseLoop):
        return True
    return callable(getattr(loop, "snapshot", None)) and callable(getattr(loop, "restore", None))
