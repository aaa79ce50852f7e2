"""Normalised refs, what can ride a checkpoint, and restoring pack state."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core.codec import dumps
from prism_core.errors import GuardrailPackError
from prism_core.guardrails import (
    GuardrailPack,
    PackRule,
    PackStateCodec,
    compile_guardrail_packs,
)

from ._support import builtin_catalogue, compile_packs, observe, result_context


def test_refs_are_normalised() -> None:
    compiled = compile_packs(
        [
            "destructive-commands",
            {"id": "coding-standard", "options": {"cwd": "/w", "roots": ("src",)}},
            {
                "id": "house",
                "rules": [
                    {"id": "a", "pattern": "x"},
                    {
                        "id": "b",
                        "tool": ["shell", "exec"],
                        "arg_path": "command",
                        "pattern": "curl",
                        "action": "ask",
                        "reason": "Network access needs approval",
                    },
                ],
            },
        ]
    )
    assert compiled.refs == (
        {"id": "destructive-commands", "version": 1},
        {"id": "coding-standard", "version": 1, "options": {"cwd": "/w", "roots": ["src"]}},
        {
            "id": "house",
            "version": 1,
            "rules": [
                {"id": "a", "pattern": "x", "action": "deny"},
                {
                    "id": "b",
                    "tool": ["shell", "exec"],
                    "arg_path": "command",
                    "pattern": "curl",
                    "action": "ask",
                    "reason": "Network access needs approval",
                },
            ],
        },
    )


def test_persistable_refs_compile_to_the_same_guards() -> None:
    first = compile_packs(
        [
            "secrets-hygiene",
            {"id": "validation-respect", "options": {"validation_tools": ["ci"]}},
            {"id": "house", "version": 3, "rules": [{"id": "r", "tool": "t", "pattern": "x"}]},
        ]
    )
    saved = first.persistable_refs()
    dumps(saved)
    again = compile_packs(saved)
    assert again.refs == first.refs
    assert [(g.name, g.stage, g.revision) for g in again.tool_input + again.tool_output] == [
        (g.name, g.stage, g.revision) for g in first.tool_input + first.tool_output
    ]


def test_persistable_refs_are_copies() -> None:
    compiled = compile_packs([{"id": "coding-standard", "options": {"roots": ["a"]}}])
    compiled.persistable_refs()[0]["options"]["roots"].append("b")
    assert compiled.refs[0]["options"] == {"roots": ["a"]}


def test_host_options_are_copied_at_compile_time() -> None:
    options = {"validation_tools": ["ci"]}
    compiled = compile_packs([{"id": "validation-respect", "options": options}])
    options["validation_tools"].append("test")
    observe(compiled, "test", {"exit_code": 1})
    assert compiled.state_of("validation-respect") is None


def test_inline_deny_predicates_cannot_be_persisted() -> None:
    def deny(args: dict[str, Any], ctx: Any) -> bool:
        return False

    compiled = compile_packs(
        ["secrets-hygiene", {"id": "house", "rules": [{"id": "pred", "deny": deny}]}]
    )
    assert compiled.refs[1]["rules"] == [{"id": "pred", "deny": deny, "action": "deny"}]
    with pytest.raises(GuardrailPackError, match="'house' rule 'pred' has a deny predicate") as e:
        compiled.persistable_refs()
    assert e.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def test_plugin_deny_predicates_persist_as_id_and_version() -> None:
    compiled = compile_packs(["coding-standard", "validation-respect"])
    assert compiled.persistable_refs() == [
        {"id": "coding-standard", "version": 1},
        {"id": "validation-respect", "version": 1},
    ]


def test_snapshot_covers_only_packs_with_a_codec() -> None:
    compiled = compile_packs(["destructive-commands", "validation-respect", "coding-standard"])
    assert compiled.snapshot_state() == {"validation-respect": {"validation_failed": None}}


def test_restoring_state_of_a_pack_that_is_not_enabled() -> None:
    compiled = compile_packs(["validation-respect"])
    with pytest.raises(GuardrailPackError, match="'other' is not enabled") as caught:
        compiled.restore_state({"other": {}})
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def test_restoring_state_of_a_pack_without_codec() -> None:
    compiled = compile_packs(["destructive-commands", "validation-respect"])
    with pytest.raises(GuardrailPackError, match="has saved state but no state codec") as caught:
        compiled.restore_state(
            {
                "validation-respect": {"validation_failed": "test"},
                "destructive-commands": {"x": 1},
            }
        )
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"
    assert compiled.state_of("validation-respect") is None


@pytest.mark.parametrize(
    "snapshots",
    [
        [],
        {"validation-respect": {"validation_failed": "x" * 9000}},
        {"validation-respect": {"validation_failed": float("nan")}},
    ],
)
def test_restoring_malformed_or_oversized_state(snapshots: Any) -> None:
    compiled = compile_packs(["validation-respect"])
    with pytest.raises(GuardrailPackError) as caught:
        compiled.restore_state(snapshots)
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def _counting_pack(snapshot: Any = lambda state: state) -> GuardrailPack:
    return GuardrailPack(
        id="counter",
        rules=(PackRule(id="r", pattern="never-matches-anything"),),
        observe=lambda state, name, result, options: state + 1,
        initial_state=0,
        state_codec=PackStateCodec(snapshot=snapshot, parse=int),
    )


def test_a_snapshot_that_is_not_json_is_refused() -> None:
    compiled = compile_guardrail_packs(
        ["counter"], catalogue={"counter": _counting_pack(snapshot=lambda state: {state})}
    )
    with pytest.raises(GuardrailPackError, match="state snapshot must be JSON data") as caught:
        compiled.snapshot_state()
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"


def test_a_failing_snapshot_is_refused() -> None:
    def snapshot(state: Any) -> Any:
        raise RuntimeError("cannot")

    compiled = compile_guardrail_packs(
        ["counter"], catalogue={"counter": _counting_pack(snapshot=snapshot)}
    )
    with pytest.raises(GuardrailPackError, match="state snapshot failed: cannot"):
        compiled.snapshot_state()


def test_mutable_initial_state_is_not_shared_between_compilations() -> None:
    pack = GuardrailPack(
        id="seen",
        rules=(PackRule(id="r", pattern="never-matches-anything"),),
        observe=lambda state, name, result, options: (state.append(name), state)[1],
        initial_state=[],
    )
    first = compile_guardrail_packs(["seen"], catalogue={"seen": pack})
    second = compile_guardrail_packs(["seen"], catalogue={"seen": pack})
    observe(first, "a")
    assert first.state_of("seen") == ["a"]
    assert second.state_of("seen") == []
    assert pack.initial_state == []


def test_observers_see_the_validated_options() -> None:
    seen: list[Any] = []

    def observe_call(state: Any, name: str, result: Any, options: Any) -> Any:
        seen.append((name, result.value, dict(options)))
        return state

    pack = GuardrailPack(
        id="watch",
        rules=(PackRule(id="r", pattern="x"),),
        validate_options=lambda options: {"level": options.get("level", 1)},
        observe=observe_call,
    )
    compiled = compile_guardrail_packs(["watch"], catalogue={"watch": pack})
    observe(compiled, "tool", {"ok": True})
    assert seen == [("tool", {"ok": True}, {"level": 1})]
    assert compiled.snapshot_state() == {}


def test_the_builtin_catalogue_is_unchanged_by_compiling() -> None:
    catalogue = builtin_catalogue()
    before = dict(catalogue)
    compile_guardrail_packs(["validation-respect"], catalogue=catalogue)
    assert catalogue == before


def test_observers_cannot_change_the_result() -> None:
    def meddle(state: Any, name: str, result: Any, options: Any) -> Any:
        result.value["output"] = "changed"
        return state

    pack = GuardrailPack(id="meddler", rules=(PackRule(id="r", pattern="x"),), observe=meddle)
    compiled = compile_guardrail_packs(["meddler"], catalogue={"meddler": pack})
    context = result_context("test", {"output": "original"})
    compiled.tool_output[0].evaluate(context)
    assert context.value.value == {"output": "original"}
