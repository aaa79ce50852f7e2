"""Every ref or definition that cannot compile fails closed with GuardrailPackError."""

from __future__ import annotations

import re
from typing import Any

import pytest

from prism_core.errors import GuardrailPackError, PrismError
from prism_core.guardrails import (
    GuardrailPack,
    PackRule,
    compile_guardrail_packs,
    pack_catalogue,
)

from ._support import builtin_catalogue, compile_packs


def refuses(refs: Any, match: str, **options: Any) -> GuardrailPackError:
    catalogue = options.pop("catalogue", None)
    with pytest.raises(GuardrailPackError, match=match) as caught:
        compile_guardrail_packs(
            refs, catalogue=builtin_catalogue() if catalogue is None else catalogue, **options
        )
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"
    assert isinstance(caught.value, PrismError)
    return caught.value


def inline_rule(**rule: Any) -> list[dict[str, Any]]:
    return [{"id": "house", "rules": [{"id": "r", **rule}]}]


def noop(args: dict[str, Any], ctx: Any) -> bool:
    return False


def test_unknown_pack_id_lists_the_known_packs() -> None:
    error = refuses(["destructive-command"], "unknown guardrail pack 'destructive-command'")
    assert (
        "known packs: coding-standard, destructive-commands, secrets-hygiene, "
        "validation-respect" in str(error)
    )
    refuses(["anything"], "known packs: none", catalogue={})


def test_duplicate_pack() -> None:
    refuses(["secrets-hygiene", {"id": "secrets-hygiene"}], "enabled twice")
    refuses(
        [{"id": "a", "rules": [{"id": "r", "pattern": "x"}]}] * 2,
        "'a' is enabled twice",
        catalogue={},
    )


def test_duplicate_rule_id() -> None:
    refuses(
        [{"id": "house", "rules": [{"id": "r", "pattern": "x"}, {"id": "r", "pattern": "y"}]}],
        "declares rule 'r' twice",
    )


def test_duplicate_pack_ids_across_plugins() -> None:
    pack = GuardrailPack(id="p", rules=(PackRule(id="r", pattern="x"),))
    with pytest.raises(GuardrailPackError, match="'p' is declared twice") as caught:
        pack_catalogue([pack, GuardrailPack(id="p", version=2, rules=pack.rules)])
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def test_catalogue_entries_must_be_packs() -> None:
    with pytest.raises(GuardrailPackError, match="must return GuardrailPack values"):
        pack_catalogue([{"id": "p", "rules": []}])
    with pytest.raises(GuardrailPackError, match="version must be a positive integer"):
        pack_catalogue([GuardrailPack(id="p", version=0, rules=())])


def test_more_than_eight_packs() -> None:
    refs = [{"id": f"p{i}", "rules": [{"id": "r", "pattern": "x"}]} for i in range(9)]
    refuses(refs, "at most 8 guardrail packs, got 9", catalogue={})
    compile_guardrail_packs(refs[:8], catalogue={})


def test_more_than_64_rules() -> None:
    rules = [{"id": f"r{i}", "pattern": "x"} for i in range(65)]
    refuses([{"id": "big", "rules": rules}], "65 rules; the limit is 64")
    compile_guardrail_packs([{"id": "big", "rules": rules[:64]}], catalogue={})


def test_empty_rules() -> None:
    refuses([{"id": "house", "rules": []}], "'house' has no rules")
    empty = GuardrailPack(id="empty", rules=lambda options: [])
    refuses(["empty"], "'empty' has no rules", catalogue={"empty": empty})


def test_pattern_and_deny_are_exclusive() -> None:
    refuses(inline_rule(pattern="x", deny=noop), "exactly one of pattern and deny")
    refuses(inline_rule(), "exactly one of pattern and deny")


def test_invalid_regex() -> None:
    refuses(inline_rule(pattern="(unclosed"), "invalid pattern")


@pytest.mark.parametrize("pattern", ["", 3, re.compile("x")])
def test_pattern_must_be_a_regex_string(pattern: Any) -> None:
    refuses(inline_rule(pattern=pattern), "pattern must be a non-empty regex string")


def test_pattern_longer_than_4_kib() -> None:
    refuses(inline_rule(pattern="é" * 2049), "longer than 4096 UTF-8 bytes")
    compile_guardrail_packs(inline_rule(pattern="x" * 4096), catalogue={})


def test_reason_longer_than_512_bytes() -> None:
    refuses(inline_rule(pattern="x", reason="€" * 171), "at most 512")
    refuses(inline_rule(pattern="x", reason=""), "non-empty string")
    compile_guardrail_packs(inline_rule(pattern="x", reason="€" * 170), catalogue={})


@pytest.mark.parametrize("bad", ["", "x" * 97, "é" * 49, None, 3])
def test_pack_ids_empty_or_too_long(bad: Any) -> None:
    refuses([{"id": bad, "rules": [{"id": "r", "pattern": "x"}]}], "at most 96 UTF-8 bytes")


@pytest.mark.parametrize("bad", ["", "x" * 97, "é" * 49, None])
def test_rule_ids_empty_or_too_long(bad: Any) -> None:
    refuses([{"id": "house", "rules": [{"id": bad, "pattern": "x"}]}], "rule id must be")


def test_ids_at_96_bytes_compile() -> None:
    compile_guardrail_packs(
        [{"id": "p" * 96, "rules": [{"id": "é" * 48, "pattern": "x"}]}], catalogue={}
    )


def test_rule_without_id() -> None:
    refuses([{"id": "house", "rules": [{"pattern": "x"}]}], "a rule has no id")


@pytest.mark.parametrize("action", ["block", "allow", "DENY", None])
def test_unknown_action(action: Any) -> None:
    refuses(inline_rule(pattern="x", action=action), "unknown action")


def test_ask_with_deny() -> None:
    refuses(inline_rule(deny=noop, action="ask"), "an ask rule needs a pattern")


def test_options_on_an_inline_pack() -> None:
    refuses(
        [{"id": "house", "options": {"a": 1}, "rules": [{"id": "r", "pattern": "x"}]}],
        "inline guardrail pack 'house' cannot take options",
    )


@pytest.mark.parametrize("version", [0, -1, 1.0, "1", True, None])
def test_version_not_a_positive_integer(version: Any) -> None:
    refuses(
        [{"id": "house", "version": version, "rules": [{"id": "r", "pattern": "x"}]}],
        "version must be a positive integer",
    )
    refuses([{"id": "secrets-hygiene", "version": version}], "version must be a positive integer")


def test_version_mismatch_with_the_installed_pack() -> None:
    refuses([{"id": "secrets-hygiene", "version": 2}], "is version 1 here")
    compile_packs([{"id": "secrets-hygiene", "version": 1}])


def test_more_than_eight_arg_paths() -> None:
    refuses(inline_rule(pattern="x", arg_path=[f"a{i}" for i in range(9)]), "at most 8 arg paths")
    compile_guardrail_packs(
        inline_rule(pattern="x", arg_path=[f"a{i}" for i in range(8)]), catalogue={}
    )


@pytest.mark.parametrize("arg_path", ["", "a..b", ".a", [], ["a", 3], 3])
def test_malformed_arg_paths(arg_path: Any) -> None:
    refuses(inline_rule(pattern="x", arg_path=arg_path), "arg_path")


@pytest.mark.parametrize("tool", ["", [], ["a", ""], 3, ["t"] * 65])
def test_malformed_tools(tool: Any) -> None:
    refuses(inline_rule(pattern="x", tool=tool), "tool must be")


def test_unknown_keys_in_a_ref() -> None:
    refuses([{"id": "secrets-hygiene", "opts": {}}], r"unknown keys \['opts'\]")
    refuses(
        [{"id": "house", "rules": [{"id": "r", "pattern": "x"}], "descr": "x"}],
        r"unknown keys \['descr'\]",
    )


def test_unknown_keys_in_a_rule() -> None:
    refuses(inline_rule(pattern="x", when="always"), r"unknown keys \['when'\]")


def test_options_rejected_by_the_pack() -> None:
    refuses(
        [{"id": "coding-standard", "options": {"root": "/x"}}],
        "'coding-standard' rejected its options: unknown options \\['root'\\]",
    )
    refuses(
        [{"id": "coding-standard", "options": {"roots": [f"r{i}" for i in range(17)]}}],
        "rejected its options: roots must be a list of 1..16",
    )
    refuses(
        [{"id": "validation-respect", "options": {"validation_tools": "test"}}],
        "rejected its options: validation_tools must be a list",
    )


def test_options_on_a_pack_without_options() -> None:
    refuses([{"id": "destructive-commands", "options": {"x": 1}}], "takes no options")


@pytest.mark.parametrize("options", [["cwd"], {"cwd": object()}, {"roots": ["x" * 9000]}, {1: 2}])
def test_options_must_be_bounded_json(options: Any) -> None:
    refuses([{"id": "coding-standard", "options": options}], "options")


@pytest.mark.parametrize("refs", ["secrets-hygiene", {"id": "secrets-hygiene"}, 3])
def test_refs_must_be_a_list(refs: Any) -> None:
    refuses(refs, "guardrail_packs must be a list")


@pytest.mark.parametrize("ref", [3, None, ["secrets-hygiene"]])
def test_each_ref_is_an_id_or_a_mapping(ref: Any) -> None:
    refuses([ref], "a guardrail pack ref is a pack id")


def test_rules_must_be_a_list_of_rules() -> None:
    refuses([{"id": "house", "rules": "r"}], "rules must be a list")
    refuses([{"id": "house", "rules": ["r"]}], "each rule must be a mapping or a PackRule")


def test_inline_pack_may_not_shadow_an_installed_pack() -> None:
    refuses(
        [{"id": "secrets-hygiene", "rules": [{"id": "r", "pattern": "x"}]}],
        "has the id of an installed pack",
    )


def test_deny_must_be_a_synchronous_callable() -> None:
    async def later(args: dict[str, Any], ctx: Any) -> bool:
        return True

    refuses(inline_rule(deny="yes"), "deny must be a synchronous callable")
    refuses(inline_rule(deny=later), "deny must be a synchronous callable")


def test_deny_rules_take_no_arg_path() -> None:
    refuses(inline_rule(deny=noop, arg_path="a"), "arg_path applies to pattern rules")


def test_failing_rules_factory() -> None:
    def rules(options: Any) -> list[PackRule]:
        raise RuntimeError("no rules today")

    pack = GuardrailPack(id="p", rules=rules)
    refuses(["p"], "building its rules failed: no rules today", catalogue={"p": pack})


def test_invalid_definitions_in_the_catalogue() -> None:
    bad_codec = GuardrailPack(id="p", rules=(PackRule(id="r", pattern="x"),), state_codec="x")
    refuses(["p"], "state_codec must be a PackStateCodec", catalogue={"p": bad_codec})
    not_callable = GuardrailPack(id="p", rules=(PackRule(id="r", pattern="x"),), observe=3)
    refuses(["p"], "observe must be callable", catalogue={"p": not_callable})


def test_nothing_to_compile() -> None:
    for refs in (None, []):
        compiled = compile_guardrail_packs(refs, catalogue=builtin_catalogue())
        assert (compiled.tool_input, compiled.tool_output, compiled.refs) == ((), (), ())
        assert compiled.snapshot_state() == {}
        assert compiled.persistable_refs() == []
