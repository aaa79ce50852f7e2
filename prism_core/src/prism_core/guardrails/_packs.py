"""Guardrail packs: named, versioned rule sets compiled onto the ``tool_input`` seam.

A pack never adds permissions or stages and never changes a call's arguments. Each rule
compiles to one ``tool_input`` guard that allows, blocks, trips or asks; a pack that keeps
state also gets one allow-only ``tool_output`` observer that updates it. Every failure to
compile raises :class:`~prism_core.errors.GuardrailPackError` before any guard exists.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ..codec import dumps, loads
from ..content import ToolResult
from ..errors import GuardrailPackError
from ..redaction import Redactor
from ._decisions import GuardrailAction, GuardrailDecision, GuardrailRecord
from ._engine import Guardrail, GuardrailConfig, GuardrailContext

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
    "CompiledGuardrailPacks",
    "GuardrailPack",
    "PackRule",
    "PackRuleAction",
    "PackRuleContext",
    "PackStateCodec",
    "compile_guardrail_packs",
    "pack_catalogue",
    "pack_refusal_message",
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

_CATALOGUE_REF_KEYS = frozenset({"id", "version", "options"})
_INLINE_REF_KEYS = frozenset({"id", "version", "rules"})
_RULE_KEYS = frozenset({"id", "tool", "arg_path", "pattern", "deny", "action", "reason"})
_ALLOW = GuardrailDecision("allow")


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


@attrs.define(eq=False)
class _PackInstance:
    """One pack enabled in one compilation: its definition, options and live state."""

    pack: GuardrailPack
    options: Mapping[str, Any]
    state: Any


@attrs.frozen(eq=False)
class _RuleCheck:
    """The ``evaluate`` of one compiled rule."""

    instance: _PackInstance
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
class _StateObserver:
    """The ``evaluate`` of a stateful pack's allow-only ``tool_output`` observer."""

    instance: _PackInstance

    def __call__(self, context: GuardrailContext) -> GuardrailDecision:
        result: ToolResult = context.value
        instance = self.instance
        observe = instance.pack.observe
        assert observe is not None
        name = context.tool_name or result.name
        # A private copy: observing a result must not change what the model sees.
        instance.state = observe(instance.state, name, copy.deepcopy(result), instance.options)
        return _ALLOW


@attrs.frozen(eq=False)
class CompiledGuardrailPacks:
    """A session's packs, compiled: the guards to install and the packs' live state.

    ``tool_input`` holds one guard per rule (named ``pack:<pack>/<rule>``); ``tool_output``
    holds one allow-only observer per pack with an ``observe`` function (named
    ``pack-state:<pack>``). ``refs`` are the normalised refs, in order.
    """

    tool_input: tuple[Guardrail, ...]
    tool_output: tuple[Guardrail, ...]
    refs: tuple[Mapping[str, Any], ...]
    redactor: Redactor | None = attrs.field(default=None, repr=False)
    _instances: tuple[_PackInstance, ...] = attrs.field(default=(), alias="instances", repr=False)

    @property
    def pack_ids(self) -> tuple[str, ...]:
        """The enabled packs' ids, in ref order."""
        return tuple(instance.pack.id for instance in self._instances)

    def config(self) -> GuardrailConfig:
        """The compiled guards as a :class:`GuardrailConfig` (observers are allow-only)."""
        return GuardrailConfig(tool_input=self.tool_input, tool_output=self.tool_output)

    def state_of(self, pack_id: str) -> Any:
        """The current state of pack ``pack_id``."""
        return self._instance(pack_id).state

    def persistable_refs(self) -> list[dict[str, Any]]:
        """The refs as JSON data that can ride a checkpoint and compile again on resume.

        Raises :class:`GuardrailPackError` naming the rule when an inline rule carries a
        ``deny`` predicate, which no checkpoint can hold.
        """
        for ref in self.refs:
            for rule in ref.get("rules", ()):
                if "deny" in rule:
                    raise GuardrailPackError(
                        f"guardrail pack {ref['id']!r} rule {rule['id']!r} has a deny predicate, "
                        "which cannot be saved in a checkpoint; use a pattern rule or ship the "
                        "pack from a plugin"
                    )
        result: list[dict[str, Any]] = loads(dumps(list(self.refs)))
        return result

    def snapshot_state(self) -> dict[str, Any]:
        """``{pack_id: snapshot}`` for every pack with a state codec.

        Raises :class:`GuardrailPackError` when a snapshot is not JSON or exceeds
        ``MAX_PACK_JSON_BYTES``.
        """
        snapshots: dict[str, Any] = {}
        for instance in self._instances:
            codec = instance.pack.state_codec
            if codec is None:
                continue
            where = f"guardrail pack {instance.pack.id!r}"
            try:
                data = codec.snapshot(instance.state)
            except Exception as exc:
                raise GuardrailPackError(f"{where}: state snapshot failed: {exc}") from exc
            snapshots[instance.pack.id] = _bounded_json(data, f"{where} state snapshot")
        return snapshots

    def restore_state(self, snapshots: Mapping[str, Any]) -> None:
        """Reinstate states saved by :meth:`snapshot_state`; all or nothing.

        Raises :class:`GuardrailPackError` for a pack that is not enabled here, a pack
        without a state codec, oversized data, or data its codec refuses to parse.
        """
        if not isinstance(snapshots, Mapping):
            raise GuardrailPackError(
                f"guardrail pack state must be a mapping, got {type(snapshots).__name__}"
            )
        restored: list[tuple[_PackInstance, Any]] = []
        for pack_id, data in snapshots.items():
            instance = self._instance(pack_id)
            codec = instance.pack.state_codec
            where = f"guardrail pack {pack_id!r}"
            if codec is None:
                raise GuardrailPackError(f"{where} has saved state but no state codec")
            data = _bounded_json(data, f"{where} state")
            try:
                state = codec.parse(data)
            except Exception as exc:
                raise GuardrailPackError(f"{where}: malformed saved state: {exc}") from exc
            restored.append((instance, state))
        for instance, state in restored:
            instance.state = state

    def refusal_message(self, record: GuardrailRecord) -> str | None:
        """:func:`pack_refusal_message` with this compilation's redactor."""
        return pack_refusal_message(record, self.redactor)

    def _instance(self, pack_id: Any) -> _PackInstance:
        for instance in self._instances:
            if instance.pack.id == pack_id:
                return instance
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r} is not enabled in this session; enabled packs: "
            f"{_listing(self.pack_ids)}"
        )


def pack_catalogue(definitions: Iterable[Any]) -> dict[str, GuardrailPack]:
    """Index pack definitions (from ``PluginHost.guardrail_packs()``) by id.

    Raises :class:`GuardrailPackError` for a value that is not a valid
    :class:`GuardrailPack`, or when two definitions share an id.
    """
    catalogue: dict[str, GuardrailPack] = {}
    for definition in definitions:
        if not isinstance(definition, GuardrailPack):
            raise GuardrailPackError(
                "prism_guardrail_packs must return GuardrailPack values, got "
                f"{type(definition).__name__}"
            )
        _check_definition(definition)
        if definition.id in catalogue:
            raise GuardrailPackError(
                f"guardrail pack {definition.id!r} is declared twice; two plugins may not "
                "provide the same pack id"
            )
        catalogue[definition.id] = definition
    return catalogue


def compile_guardrail_packs(
    refs: Sequence[Any] | None,
    *,
    catalogue: Mapping[str, GuardrailPack],
    can_suspend: bool = False,
    redactor: Redactor | None = None,
) -> CompiledGuardrailPacks:
    """Compile a session's ``guardrail_packs`` refs into guards.

    Each ref is a pack id, ``{"id", "version"?, "options"?}`` naming a pack of
    ``catalogue`` (see :func:`pack_catalogue`), or an inline pack
    ``{"id", "version"?, "rules": [...]}``. ``can_suspend`` says whether the run can suspend
    for approval: ``ask`` rules then interrupt, otherwise they block. Raises
    :class:`GuardrailPackError` for anything that does not compile.
    """
    if refs is None:
        refs = ()
    if isinstance(refs, str | bytes | Mapping) or not isinstance(refs, Sequence):
        raise GuardrailPackError(
            f"guardrail_packs must be a list of pack refs, got {type(refs).__name__}"
        )
    if len(refs) > MAX_GUARDRAIL_PACKS:
        raise GuardrailPackError(
            f"a session may enable at most {MAX_GUARDRAIL_PACKS} guardrail packs, got {len(refs)}"
        )
    tool_input: list[Guardrail] = []
    tool_output: list[Guardrail] = []
    normalised: list[Mapping[str, Any]] = []
    instances: list[_PackInstance] = []
    for ref in refs:
        pack, options, row = _resolve(ref, catalogue)
        if any(instance.pack.id == pack.id for instance in instances):
            raise GuardrailPackError(f"guardrail pack {pack.id!r} is enabled twice")
        instance = _PackInstance(pack, options, copy.deepcopy(pack.initial_state))
        rules = _pack_rules(pack, options)
        seen: set[str] = set()
        inline_rows: list[dict[str, Any]] = []
        for rule in rules:
            check = _compile_rule(instance, rule, can_suspend)
            if rule.id in seen:
                raise GuardrailPackError(
                    f"guardrail pack {pack.id!r} declares rule {rule.id!r} twice"
                )
            seen.add(rule.id)
            inline_rows.append(_rule_row(rule))
            tool_input.append(
                Guardrail(
                    f"pack:{pack.id}/{rule.id}", "tool_input", check, revision=str(pack.version)
                )
            )
        if "rules" in row:
            row["rules"] = inline_rows
        if pack.observe is not None:
            tool_output.append(
                Guardrail(
                    f"pack-state:{pack.id}",
                    "tool_output",
                    _StateObserver(instance),
                    revision=str(pack.version),
                )
            )
        normalised.append(row)
        instances.append(instance)
    return CompiledGuardrailPacks(
        tuple(tool_input),
        tuple(tool_output),
        tuple(normalised),
        redactor,
        instances=tuple(instances),
    )


def pack_refusal_message(record: GuardrailRecord, redactor: Redactor | None = None) -> str | None:
    """The model-visible refusal for a record a pack rule produced, else ``None``.

    ``"Blocked by guardrail rule pack:<pack>/<rule>"``, followed by ``": <reason>"`` when
    the rule has a reason of its own. The text names the rule, never the call's arguments;
    it is redacted with ``redactor`` and then cut, on a character boundary, to at most
    ``MAX_PACK_REFUSAL_BYTES`` (200) UTF-8 bytes: that bound is the specification's.
    """
    metadata = record.metadata
    if record.action == "allow" or not isinstance(metadata, Mapping):
        return None
    pack, rule = metadata.get("pack"), metadata.get("rule")
    if not isinstance(pack, str) or not isinstance(rule, str):
        return None
    if record.guardrail != f"pack:{pack}/{rule}":
        return None
    message = f"Blocked by guardrail rule pack:{pack}/{rule}"
    if record.reason and record.reason != _default_reason(pack, rule):
        message += f": {record.reason}"
    if redactor is not None:
        message = redactor.redact_text(message)
    # Dropping the bytes of a cut character keeps the prefix valid UTF-8.
    return message.encode("utf-8")[:MAX_PACK_REFUSAL_BYTES].decode("utf-8", errors="ignore")


# -- resolution -------------------------------------------------------------------------------


def _resolve(
    ref: Any, catalogue: Mapping[str, GuardrailPack]
) -> tuple[GuardrailPack, Mapping[str, Any], dict[str, Any]]:
    """The pack a ref names, its validated options, and the ref's normalised row."""
    if isinstance(ref, str):
        ref = {"id": ref}
    if not isinstance(ref, Mapping):
        raise GuardrailPackError(
            "a guardrail pack ref is a pack id, {'id', 'options'?} or an inline pack "
            f"{{'id', 'rules'}}, got {type(ref).__name__}"
        )
    pack_id = _check_id(ref.get("id"), "guardrail pack id")
    if "rules" in ref:
        return _resolve_inline(pack_id, ref, catalogue)
    unknown = _unknown_keys(ref, _CATALOGUE_REF_KEYS)
    if unknown:
        raise GuardrailPackError(
            f"guardrail pack ref {pack_id!r} has unknown keys {unknown}; a ref has id, "
            "version and options (or id, version and rules for an inline pack)"
        )
    pack = catalogue.get(pack_id)
    if pack is None:
        raise GuardrailPackError(
            f"unknown guardrail pack {pack_id!r}; known packs: {_listing(sorted(catalogue))}. "
            "Register the plugin that provides it (create_agent(plugins=[...])) or pass an "
            "inline pack with rules"
        )
    _check_definition(pack)
    if "version" in ref:
        _check_version(ref["version"], pack_id)
        if ref["version"] != pack.version:
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r} is version {pack.version} here, but the ref asks "
                f"for version {ref['version']}"
            )
    row: dict[str, Any] = {"id": pack_id, "version": pack.version}
    options: Mapping[str, Any] = {}
    if "options" in ref:
        options = _json_options(ref["options"], pack_id)
        if pack.validate_options is None and options:
            raise GuardrailPackError(f"guardrail pack {pack_id!r} takes no options")
        row["options"] = copy.deepcopy(options)
    if pack.validate_options is not None:
        try:
            validated = pack.validate_options(copy.deepcopy(options))
        except Exception as exc:
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r} rejected its options: {exc}"
            ) from exc
        if not isinstance(validated, Mapping):
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r}: validate_options must return a mapping"
            )
        options = validated
    return pack, options, row


def _resolve_inline(
    pack_id: str, ref: Mapping[str, Any], catalogue: Mapping[str, GuardrailPack]
) -> tuple[GuardrailPack, Mapping[str, Any], dict[str, Any]]:
    if "options" in ref:
        raise GuardrailPackError(
            f"inline guardrail pack {pack_id!r} cannot take options; put the values in its rules"
        )
    unknown = _unknown_keys(ref, _INLINE_REF_KEYS)
    if unknown:
        raise GuardrailPackError(
            f"inline guardrail pack {pack_id!r} has unknown keys {unknown}; it has id, version "
            "and rules"
        )
    if pack_id in catalogue:
        raise GuardrailPackError(
            f"inline guardrail pack {pack_id!r} has the id of an installed pack; choose another id"
        )
    version = ref.get("version", 1)
    _check_version(version, pack_id)
    rules = ref["rules"]
    if isinstance(rules, str | bytes | Mapping) or not isinstance(rules, Sequence):
        raise GuardrailPackError(f"inline guardrail pack {pack_id!r}: rules must be a list")
    pack = GuardrailPack(id=pack_id, version=version, rules=tuple(rules))
    return pack, {}, {"id": pack_id, "version": version, "rules": []}


def _pack_rules(pack: GuardrailPack, options: Mapping[str, Any]) -> list[PackRule]:
    rules: Any = pack.rules
    if callable(rules):
        try:
            rules = rules(options)
        except Exception as exc:
            raise GuardrailPackError(
                f"guardrail pack {pack.id!r}: building its rules failed: {exc}"
            ) from exc
    if isinstance(rules, str | bytes | Mapping) or not isinstance(rules, Sequence):
        raise GuardrailPackError(f"guardrail pack {pack.id!r}: rules must be a sequence")
    if not rules:
        raise GuardrailPackError(f"guardrail pack {pack.id!r} has no rules")
    if len(rules) > MAX_PACK_RULES:
        raise GuardrailPackError(
            f"guardrail pack {pack.id!r} has {len(rules)} rules; the limit is {MAX_PACK_RULES}"
        )
    return [_as_rule(pack.id, rule) for rule in rules]


def _as_rule(pack_id: str, rule: Any) -> PackRule:
    if isinstance(rule, PackRule):
        return rule
    if not isinstance(rule, Mapping):
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r}: each rule must be a mapping or a PackRule, got "
            f"{type(rule).__name__}"
        )
    unknown = _unknown_keys(rule, _RULE_KEYS)
    if unknown:
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r} rule {rule.get('id')!r} has unknown keys {unknown}; "
            f"a rule has {sorted(_RULE_KEYS)}"
        )
    if "id" not in rule:
        raise GuardrailPackError(f"guardrail pack {pack_id!r}: a rule has no id")
    return PackRule(**{str(key): value for key, value in rule.items()})


# -- rules ------------------------------------------------------------------------------------


def _compile_rule(instance: _PackInstance, rule: PackRule, can_suspend: bool) -> _RuleCheck:
    pack = instance.pack
    _check_id(rule.id, f"guardrail pack {pack.id!r}: rule id")
    where = f"guardrail pack {pack.id!r} rule {rule.id!r}"
    if rule.action not in PACK_RULE_ACTIONS:
        raise GuardrailPackError(
            f"{where}: unknown action {rule.action!r}; use one of {list(PACK_RULE_ACTIONS)}"
        )
    if (rule.pattern is None) == (rule.deny is None):
        raise GuardrailPackError(f"{where}: give exactly one of pattern and deny")
    regex: re.Pattern[str] | None = None
    if rule.pattern is not None:
        regex = _compile_pattern(rule.pattern, where)
    else:
        if rule.action == "ask":
            raise GuardrailPackError(
                f"{where}: an ask rule needs a pattern; a deny predicate cannot ask"
            )
        if not callable(rule.deny) or inspect.iscoroutinefunction(rule.deny):
            raise GuardrailPackError(f"{where}: deny must be a synchronous callable")
        if rule.arg_path is not None:
            raise GuardrailPackError(
                f"{where}: arg_path applies to pattern rules; a deny predicate gets all arguments"
            )
    if rule.reason is not None and (
        not isinstance(rule.reason, str)
        or not rule.reason
        or len(rule.reason.encode("utf-8")) > MAX_PACK_REASON_BYTES
    ):
        raise GuardrailPackError(
            f"{where}: reason must be a non-empty string of at most {MAX_PACK_REASON_BYTES} "
            "UTF-8 bytes"
        )
    action: GuardrailAction = "block"
    if rule.action == "tripwire":
        action = "tripwire"
    elif rule.action == "ask" and can_suspend:
        action = "interrupt"
    decision = GuardrailDecision(
        action,
        rule.reason or _default_reason(pack.id, rule.id),
        {"pack": pack.id, "rule": rule.id, "version": pack.version},
    )
    return _RuleCheck(
        instance,
        rule,
        _tool_names(rule.tool, where),
        _arg_paths(rule.arg_path, where),
        regex,
        decision,
    )


def _compile_pattern(pattern: Any, where: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise GuardrailPackError(f"{where}: pattern must be a non-empty regex string")
    if len(pattern.encode("utf-8")) > MAX_PACK_PATTERN_BYTES:
        raise GuardrailPackError(
            f"{where}: pattern is longer than {MAX_PACK_PATTERN_BYTES} UTF-8 bytes"
        )
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise GuardrailPackError(f"{where}: invalid pattern: {exc}") from exc


def _tool_names(tool: Any, where: str) -> frozenset[str] | None:
    if tool is None:
        return None
    names = (tool,) if isinstance(tool, str) else tool
    if (
        not isinstance(names, Sequence)
        or not 1 <= len(names) <= MAX_PACK_TOOLS
        or not all(isinstance(name, str) and name for name in names)
    ):
        raise GuardrailPackError(
            f"{where}: tool must be a tool name or a list of 1..{MAX_PACK_TOOLS} tool names"
        )
    return frozenset(names)


def _arg_paths(arg_path: Any, where: str) -> tuple[tuple[str, ...], ...] | None:
    if arg_path is None:
        return None
    paths = (arg_path,) if isinstance(arg_path, str) else arg_path
    if not isinstance(paths, Sequence) or not paths or not all(isinstance(p, str) for p in paths):
        raise GuardrailPackError(f"{where}: arg_path must be a dot path or a list of dot paths")
    if len(paths) > MAX_PACK_ARG_PATHS:
        raise GuardrailPackError(
            f"{where}: at most {MAX_PACK_ARG_PATHS} arg paths, got {len(paths)}"
        )
    split = tuple(tuple(path.split(".")) for path in paths)
    if any(not all(split_path) for split_path in split):
        raise GuardrailPackError(f"{where}: arg_path {list(paths)} has an empty segment")
    return split


def _rule_row(rule: PackRule) -> dict[str, Any]:
    """A rule as the plain data of an inline pack ref (with ``deny`` kept as given)."""
    row: dict[str, Any] = {"id": rule.id}
    for key in ("tool", "arg_path"):
        value = getattr(rule, key)
        if value is not None:
            row[key] = value if isinstance(value, str) else list(value)
    if rule.pattern is not None:
        row["pattern"] = rule.pattern
    if rule.deny is not None:
        row["deny"] = rule.deny
    row["action"] = rule.action
    if rule.reason is not None:
        row["reason"] = rule.reason
    return row


# -- matching ---------------------------------------------------------------------------------


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


# -- checks -----------------------------------------------------------------------------------


def _check_definition(pack: GuardrailPack) -> None:
    _check_id(pack.id, "guardrail pack id")
    _check_version(pack.version, pack.id)
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


def _check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or len(value.encode("utf-8")) > MAX_PACK_ID_BYTES:
        raise GuardrailPackError(
            f"{what} must be a non-empty string of at most {MAX_PACK_ID_BYTES} UTF-8 bytes, "
            f"got {value!r}"
        )
    return value


def _check_version(value: Any, pack_id: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r}: version must be a positive integer, got {value!r}"
        )


def _json_options(options: Any, pack_id: str) -> dict[str, Any]:
    if not isinstance(options, Mapping):
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r}: options must be a mapping, got {type(options).__name__}"
        )
    data: dict[str, Any] = _bounded_json(options, f"guardrail pack {pack_id!r} options")
    return data


def _bounded_json(value: Any, what: str) -> Any:
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


def _unknown_keys(mapping: Mapping[Any, Any], allowed: frozenset[str]) -> list[str]:
    return sorted(str(key) for key in mapping if key not in allowed)


def _default_reason(pack_id: str, rule_id: str) -> str:
    return f"guardrail pack rule {pack_id}/{rule_id}"


def _listing(ids: Iterable[str]) -> str:
    names = ", ".join(ids)
    return names or "none"
