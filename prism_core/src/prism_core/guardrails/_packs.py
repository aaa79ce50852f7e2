"""Guardrail packs: named, versioned rule sets compiled onto the ``tool_input`` seam.

A pack never adds permissions or stages and never changes a call's arguments. Each rule
compiles to one ``tool_input`` guard that allows, blocks, trips or asks; a pack that keeps
state also gets one allow-only ``tool_output`` observer that updates it. Every failure to
compile raises :class:`~prism_core.errors.GuardrailPackError` before any guard exists.

This module is the compiler: it resolves refs against the catalogue, validates options and
rules, and builds the guards (``_pack_matching``) and the compiled set (``_pack_state``) from
the definitions in ``_pack_model``.

It must not evaluate rules (``_pack_matching``) or hold live pack state (``_pack_state``).
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import GuardrailPackError
from ..redaction import Redactor
from ._decisions import GuardrailAction, GuardrailDecision
from ._engine import Guardrail
from ._pack_matching import RuleCheck, StateObserver
from ._pack_model import (
    MAX_GUARDRAIL_PACKS,
    MAX_PACK_ARG_PATHS,
    MAX_PACK_PATTERN_BYTES,
    MAX_PACK_REASON_BYTES,
    MAX_PACK_RULES,
    MAX_PACK_TOOLS,
    PACK_RULE_ACTIONS,
    GuardrailPack,
    PackInstance,
    PackRule,
    check_definition,
    check_id,
    check_version,
    default_reason,
    json_options,
    listing,
    unknown_keys,
)
from ._pack_state import CompiledGuardrailPacks

__all__ = ("compile_guardrail_packs", "pack_catalogue")

_CATALOGUE_REF_KEYS = frozenset({"id", "version", "options"})
_INLINE_REF_KEYS = frozenset({"id", "version", "rules"})
_RULE_KEYS = frozenset({"id", "tool", "arg_path", "pattern", "deny", "action", "reason"})


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
        check_definition(definition)
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
    instances: list[PackInstance] = []
    for ref in refs:
        pack, options, row = _resolve(ref, catalogue)
        if any(instance.pack.id == pack.id for instance in instances):
            raise GuardrailPackError(f"guardrail pack {pack.id!r} is enabled twice")
        instance = PackInstance(pack, options, copy.deepcopy(pack.initial_state))
        # Every guard of a pack carries the pack's identity and version: ``<pack>@<version>``.
        revision = f"{pack.id}@{pack.version}"
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
                Guardrail(f"pack:{pack.id}/{rule.id}", "tool_input", check, revision=revision)
            )
        if "rules" in row:
            row["rules"] = inline_rows
        if pack.observe is not None:
            tool_output.append(
                Guardrail(
                    f"pack-state:{pack.id}",
                    "tool_output",
                    StateObserver(instance),
                    revision=revision,
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
    pack_id = check_id(ref.get("id"), "guardrail pack id")
    if "rules" in ref:
        return _resolve_inline(pack_id, ref, catalogue)
    unknown = unknown_keys(ref, _CATALOGUE_REF_KEYS)
    if unknown:
        raise GuardrailPackError(
            f"guardrail pack ref {pack_id!r} has unknown keys {unknown}; a ref has id, "
            "version and options (or id, version and rules for an inline pack)"
        )
    pack = catalogue.get(pack_id)
    if pack is None:
        raise GuardrailPackError(
            f"unknown guardrail pack {pack_id!r}; known packs: {listing(sorted(catalogue))}. "
            "Register the plugin that provides it (create_agent(plugins=[...])) or pass an "
            "inline pack with rules"
        )
    check_definition(pack)
    if "version" in ref:
        check_version(ref["version"], pack_id)
        if ref["version"] != pack.version:
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r} is version {pack.version} here, but the ref asks "
                f"for version {ref['version']}"
            )
    row: dict[str, Any] = {"id": pack_id, "version": pack.version}
    options: Mapping[str, Any] = {}
    if "options" in ref:
        options = json_options(ref["options"], pack_id)
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
    unknown = unknown_keys(ref, _INLINE_REF_KEYS)
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
    check_version(version, pack_id)
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
    unknown = unknown_keys(rule, _RULE_KEYS)
    if unknown:
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r} rule {rule.get('id')!r} has unknown keys {unknown}; "
            f"a rule has {sorted(_RULE_KEYS)}"
        )
    if "id" not in rule:
        raise GuardrailPackError(f"guardrail pack {pack_id!r}: a rule has no id")
    return PackRule(**{str(key): value for key, value in rule.items()})


# -- rules ------------------------------------------------------------------------------------


def _compile_rule(instance: PackInstance, rule: PackRule, can_suspend: bool) -> RuleCheck:
    pack = instance.pack
    check_id(rule.id, f"guardrail pack {pack.id!r}: rule id")
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
        rule.reason or default_reason(pack.id, rule.id),
        {"pack": pack.id, "rule": rule.id, "version": pack.version},
    )
    return RuleCheck(
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
