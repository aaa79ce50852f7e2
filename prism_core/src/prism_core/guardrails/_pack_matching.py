"""Guardrail pack rules at work: matching a call against a compiled rule, observing results.

Owns the ``evaluate`` callables the compiler installs: a rule's check (tool filter, pattern
over the strings at the rule's argument paths, or its ``deny`` predicate on a private copy of
the arguments) and a stateful pack's allow-only ``tool_output`` observer. It must not
compile, and must not change a call or a result.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from ..content import ToolResult
from ._decisions import GuardrailDecision
from ._engine import GuardrailContext
from ._pack_model import PackInstance, PackRule, PackRuleContext

__all__ = ("RuleCheck", "StateObserver")

_ALLOW = GuardrailDecision("allow")


@attrs.frozen(eq=False)
class RuleCheck:
    """The ``evaluate`` of one compiled rule."""

    instance: PackInstance
    rule: PackRule
    tools: frozenset[str] | None
    paths: tuple[tuple[str, ...], ...] | None
    regex: re.Pattern[str] | None
    decision: GuardrailDecision

    def __call__(self, context: GuardrailContext) -> GuardrailDecision:
        call = context.value
        name: str = call.name
        if self.tools is not None and name not in self.tools:
            return _ALLOW
        return self.decision if self._fires(call.arguments, name, context) else _ALLOW

    def _fires(self, arguments: Mapping[str, Any], name: str, context: GuardrailContext) -> bool:
        if self.regex is not None:
            regex = self.regex
            return any(regex.search(text) for text in _strings_at(arguments, self.paths))
        assert self.rule.deny is not None
        instance = self.instance
        ctx = PackRuleContext(
            pack=instance.pack.id,
            rule=self.rule.id,
            version=instance.pack.version,
            tool_name=name,
            options=instance.options,
            state=instance.state,
            guardrail=context,
        )
        # A private copy: a predicate can look at the arguments but never change the call.
        outcome = self.rule.deny(copy.deepcopy(dict(arguments)), ctx)
        if inspect.isawaitable(outcome):
            close = getattr(outcome, "close", None)
            if callable(close):
                close()
            raise TypeError(f"deny predicate of {self.rule.id!r} must be synchronous")
        return bool(outcome)


@attrs.frozen(eq=False)
class StateObserver:
    """The ``evaluate`` of a stateful pack's allow-only ``tool_output`` observer."""

    instance: PackInstance

    def __call__(self, context: GuardrailContext) -> GuardrailDecision:
        result: ToolResult = context.value
        instance = self.instance
        observe = instance.pack.observe
        assert observe is not None
        name = context.tool_name or result.name
        # A private copy: observing a result must not change what the model sees.
        instance.state = observe(instance.state, name, copy.deepcopy(result), instance.options)
        return _ALLOW


def _strings_at(
    arguments: Mapping[str, Any], paths: tuple[tuple[str, ...], ...] | None
) -> Iterator[str]:
    """Every string at (or below) each path, or every string anywhere when ``paths`` is None."""
    if paths is None:
        yield from _strings(arguments)
        return
    for path in paths:
        found, value = _lookup(arguments, path)
        if found:
            yield from _strings(value)


def _lookup(value: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    for segment in path:
        if isinstance(value, Mapping) and segment in value:
            value = value[segment]
        elif isinstance(value, list | tuple) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return False, None
    return True, value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
