"""Guardrail pack definitions: what a pack is, its bounds, and the checks on a definition.

Owns ``GuardrailPack``, ``PackRule``, ``PackRuleContext``, ``PackStateCodec``, the pack bounds,
and the validation helpers the compiler and the state codec share. Plain data and checks: it
must not compile or evaluate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ..codec import dumps, loads
from ..content import ToolResult
from ..errors import GuardrailPackError
from ._engine import GuardrailContext

__all__ = (
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
    "GuardrailPack",
    "PackInstance",
    "PackRule",
    "PackRuleAction",
    "PackRuleContext",
    "PackStateCodec",
    "bounded_json",
    "check_definition",
    "check_rule_shape",
    "check_id",
    "check_version",
    "default_reason",
    "json_options",
    "listing",
    "unknown_keys",
)

MAX_GUARDRAIL_PACKS = 8
MAX_PACK_RULES = 64
MAX_PACK_ID_BYTES = 96
MAX_PACK_PATTERN_BYTES = 4096
MAX_PACK_REASON_BYTES = 512
MAX_PACK_ARG_PATHS = 8
MAX_PACK_TOOLS = 64
#: Bound on a pack's host options and on one pack's state snapshot (canonical JSON bytes).
MAX_PACK_JSON_BYTES = 8192
#: Bound on the model-visible refusal text, fixed by the specification.
MAX_PACK_REFUSAL_BYTES = 200

PackRuleAction: TypeAlias = Literal["deny", "tripwire", "ask"]
PACK_RULE_ACTIONS: tuple[PackRuleAction, ...] = ("deny", "tripwire", "ask")


def _tupled(value: Any) -> Any:
    """Lists become tuples so a frozen definition does not share a mutable list."""
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class PackStateCodec:
    """How a pack's state crosses a checkpoint.

    ``snapshot(state)`` returns JSON-compatible data; ``parse(data)`` rebuilds the state and
    raises (any exception) when ``data`` is malformed.
    """

    snapshot: Callable[[Any], Any]
    parse: Callable[[Any], Any]


@attrs.frozen(kw_only=True)
class PackRuleContext:
    """What a rule's ``deny(args, ctx)`` predicate sees besides the call's arguments.

    ``options`` are the pack's validated options (empty for a pack that takes none),
    ``state`` is the pack's current state (``None`` for a stateless pack) and ``guardrail``
    is the full :class:`GuardrailContext` of the ``tool_input`` check.
    """

    pack: str
    rule: str
    version: int
    tool_name: str
    options: Mapping[str, Any]
    state: Any
    guardrail: GuardrailContext = attrs.field(repr=False)


DenyPredicate: TypeAlias = Callable[[dict[str, Any], PackRuleContext], Any]
RulesFactory: TypeAlias = Callable[[Mapping[str, Any]], Sequence[Any]]
OptionsValidator: TypeAlias = Callable[[Mapping[str, Any]], Mapping[str, Any]]
StateObserver: TypeAlias = Callable[[Any, str, ToolResult, Mapping[str, Any]], Any]


@attrs.frozen(kw_only=True)
class PackRule:
    """One rule of a pack.

    A rule applies to the calls of ``tool`` (a name or names; every tool when ``None``) and
    fires when ``pattern`` (a regex, matched with :func:`re.search`) finds any string at
    ``arg_path`` (a dot path or paths; every string anywhere in the arguments when ``None``),
    or, instead of a pattern, when the synchronous predicate ``deny(args, ctx)`` returns
    something truthy. ``args`` is a private copy of the call's arguments and ``ctx`` a
    :class:`PackRuleContext`. ``action`` is ``"deny"`` (block the call), ``"tripwire"`` (fail
    the run) or ``"ask"`` (suspend for approval where the run can, else block; pattern rules
    only). ``reason`` is shown to the model after the rule's name.
    """

    id: str
    tool: str | Sequence[str] | None = attrs.field(default=None, converter=_tupled)
    arg_path: str | Sequence[str] | None = attrs.field(default=None, converter=_tupled)
    pattern: str | None = None
    deny: DenyPredicate | None = attrs.field(default=None, eq=False)
    action: PackRuleAction = "deny"
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        # A rule that can never work is refused where it is written, not when a session
        # first enables its pack.
        check_rule_shape(self.id, self.pattern, self.deny, self.action)


def check_rule_shape(rule_id: Any, pattern: Any, deny: Any, action: Any) -> None:
    """Refuse a rule whose regex does not compile, or a ``deny`` predicate that asks.

    Raises :class:`GuardrailPackError` naming the rule and the fix; the other checks of a
    rule (ids, bounds, tools, paths) run when its pack is compiled."""
    where = f"guardrail pack rule {rule_id!r}"
    if isinstance(pattern, str) and pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise GuardrailPackError(
                f"{where}: invalid pattern ({exc}); fix the regular expression (Python re "
                "syntax: escape a literal '(', '[' or '\\' with a backslash)"
            ) from exc
    elif pattern is None and deny is not None and action == "ask":
        raise GuardrailPackError(
            f"{where}: an ask rule needs a pattern; a deny predicate cannot ask. Use "
            "action='deny' or 'tripwire' with deny=, or give a pattern to ask on"
        )


@attrs.frozen(kw_only=True)
class GuardrailPack:
    """A named, versioned set of rules that sessions enable by id.

    - ``rules``: a sequence of :class:`PackRule` (or rule mappings), or ``rules(options)``
      returning one, for packs whose rule set depends on their options.
    - ``validate_options(options) -> options``: checks and normalises the host's options
      (raise ``ValueError`` with a clear message); ``None`` means the pack takes no options.
      It is called at compile time with ``{}`` when the host gave none, so defaults resolve.
    - ``observe(state, call_name, result, options) -> state``: for packs with state, called
      after every executed tool call with its :class:`~prism_core.ToolResult`.
    - ``initial_state``: each compilation starts from a deep copy of it.
    - ``state_codec``: lets the state ride a checkpoint (see :class:`PackStateCodec`).
    """

    id: str
    version: int = 1
    rules: Sequence[PackRule | Mapping[str, Any]] | RulesFactory = attrs.field(converter=_tupled)
    validate_options: OptionsValidator | None = attrs.field(default=None, eq=False)
    state_codec: PackStateCodec | None = attrs.field(default=None, eq=False)
    observe: StateObserver | None = attrs.field(default=None, eq=False)
    initial_state: Any = None
    description: str | None = None

    def __attrs_post_init__(self) -> None:
        if callable(self.rules) or not isinstance(self.rules, tuple):
            return
        for rule in self.rules:
            if isinstance(rule, Mapping):
                check_rule_shape(
                    rule.get("id"), rule.get("pattern"), rule.get("deny"), rule.get("action")
                )


@attrs.define(eq=False)
class PackInstance:
    """One pack enabled in one compilation: its definition, options and live state."""

    pack: GuardrailPack
    options: Mapping[str, Any]
    state: Any


def check_definition(pack: GuardrailPack) -> None:
    """Refuse a malformed pack definition (id, version, rules, callables, codec)."""
    check_id(pack.id, "guardrail pack id")
    check_version(pack.version, pack.id)
    where = f"guardrail pack {pack.id!r}"
    if not callable(pack.rules) and (
        isinstance(pack.rules, str | bytes | Mapping) or not isinstance(pack.rules, Sequence)
    ):
        raise GuardrailPackError(f"{where}: rules must be a sequence or rules(options)")
    for name in ("validate_options", "observe"):
        value = getattr(pack, name)
        if value is not None and not callable(value):
            raise GuardrailPackError(f"{where}: {name} must be callable")
    codec = pack.state_codec
    if codec is not None and (
        not isinstance(codec, PackStateCodec)
        or not callable(codec.snapshot)
        or not callable(codec.parse)
    ):
        raise GuardrailPackError(f"{where}: state_codec must be a PackStateCodec(snapshot, parse)")
    if pack.description is not None and not isinstance(pack.description, str):
        raise GuardrailPackError(f"{where}: description must be a string")


def check_id(value: Any, what: str) -> str:
    """``value`` when it is a valid pack or rule id, else a :class:`GuardrailPackError`."""
    if not isinstance(value, str) or not value or len(value.encode("utf-8")) > MAX_PACK_ID_BYTES:
        raise GuardrailPackError(
            f"{what} must be a non-empty string of at most {MAX_PACK_ID_BYTES} UTF-8 bytes, "
            f"got {value!r}"
        )
    return value


def check_version(value: Any, pack_id: Any) -> None:
    """Refuse a pack version that is not a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r}: version must be a positive integer, got {value!r}"
        )


def json_options(options: Any, pack_id: str) -> dict[str, Any]:
    """A pack's host options as bounded plain JSON data."""
    if not isinstance(options, Mapping):
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r}: options must be a mapping, got {type(options).__name__}"
        )
    data: dict[str, Any] = bounded_json(options, f"guardrail pack {pack_id!r} options")
    return data


def bounded_json(value: Any, what: str) -> Any:
    """``value`` as plain JSON data, refusing what JSON cannot carry or what is too large."""
    if isinstance(value, Mapping) and not all(isinstance(key, str) for key in value):
        raise GuardrailPackError(f"{what} must have string keys")
    try:
        encoded = dumps(value)
    except (TypeError, ValueError) as exc:
        raise GuardrailPackError(f"{what} must be JSON data: {exc}") from exc
    if len(encoded) > MAX_PACK_JSON_BYTES:
        raise GuardrailPackError(
            f"{what} is {len(encoded)} bytes of JSON; the limit is {MAX_PACK_JSON_BYTES}"
        )
    return loads(encoded)


def unknown_keys(mapping: Mapping[Any, Any], allowed: frozenset[str]) -> list[str]:
    """The keys of ``mapping`` outside ``allowed``, sorted."""
    return sorted(str(key) for key in mapping if key not in allowed)


def default_reason(pack_id: str, rule_id: str) -> str:
    """The reason of a rule that gives none."""
    return f"guardrail pack rule {pack_id}/{rule_id}"


def listing(ids: Iterable[str]) -> str:
    """``ids`` for an error message (``"none"`` when empty)."""
    names = ", ".join(ids)
    return names or "none"
