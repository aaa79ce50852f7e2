"""Rule identity (names, revisions, metadata, reasons, actions) and the model-visible refusal."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import create_secret_redactor
from prism_core.guardrails import (
    MAX_PACK_REFUSAL_BYTES,
    CompiledGuardrailPacks,
    GuardrailDecision,
    GuardrailRecord,
    compile_guardrail_packs,
    evaluate_guardrails,
    pack_refusal_message,
)

from ._support import call_context, compile_packs, decisions


def inline(*rules: dict[str, Any], pack_id: str = "house", version: int = 1) -> dict[str, Any]:
    return {"id": pack_id, "version": version, "rules": list(rules)}


def compile_inline(*rules: dict[str, Any], **options: Any) -> CompiledGuardrailPacks:
    return compile_guardrail_packs([inline(*rules)], catalogue={}, **options)


def record_for(
    compiled: CompiledGuardrailPacks, tool: str, arguments: dict[str, Any]
) -> GuardrailRecord:
    """The record of the first guard that does not allow, as the engine would write it."""
    for name, decision in decisions(compiled, tool, arguments).items():
        if decision.action != "allow":
            return GuardrailRecord(
                name, "tool_input", decision.action, decision.reason, decision.metadata
            )
    raise AssertionError("no rule fired")


def test_one_guard_per_rule_named_after_pack_and_rule() -> None:
    compiled = compile_packs(["destructive-commands", "validation-respect"])
    assert [guard.name for guard in compiled.tool_input] == [
        "pack:destructive-commands/no-recursive-force-delete",
        "pack:destructive-commands/no-long-flag-force-delete",
        "pack:destructive-commands/no-force-push",
        "pack:destructive-commands/no-destructive-sql",
        "pack:destructive-commands/no-device-overwrite",
        "pack:validation-respect/no-mutation-after-failed-validation",
    ]
    assert {guard.stage for guard in compiled.tool_input} == {"tool_input"}
    assert {guard.revision for guard in compiled.tool_input} == {
        "destructive-commands@1",
        "validation-respect@1",
    }
    assert compiled.pack_ids == ("destructive-commands", "validation-respect")
    assert [guard.name for guard in compiled.config().tool_output] == [
        "pack-state:validation-respect"
    ]


def test_a_fired_rule_carries_pack_rule_and_version() -> None:
    compiled = compile_inline(
        {"id": "no-curl", "tool": "shell", "pattern": "curl", "reason": "No network"}
    )
    decision = decisions(compiled, "shell", {"command": "curl x"})["pack:house/no-curl"]
    assert decision == GuardrailDecision(
        "block", "No network", {"pack": "house", "rule": "no-curl", "version": 1}
    )


def test_revision_follows_the_pack_version() -> None:
    compiled = compile_guardrail_packs(
        [inline({"id": "r", "pattern": "x"}, version=7)], catalogue={}
    )
    [guard] = compiled.tool_input
    assert guard.revision == "house@7"
    assert guard.evaluate(call_context("t", {"a": "x"})).metadata == {
        "pack": "house",
        "rule": "r",
        "version": 7,
    }


def test_the_default_reason_names_the_rule() -> None:
    compiled = compile_inline({"id": "no-x", "pattern": "x"})
    decision = decisions(compiled, "t", {"a": "x"})["pack:house/no-x"]
    assert decision.reason == "guardrail pack rule house/no-x"


def test_non_matching_calls_are_allowed_without_metadata() -> None:
    compiled = compile_inline({"id": "no-x", "pattern": "x"})
    assert decisions(compiled, "t", {"a": "y"}) == {"pack:house/no-x": GuardrailDecision("allow")}


@pytest.mark.parametrize(
    ("action", "can_suspend", "expected"),
    [
        ("deny", False, "block"),
        ("deny", True, "block"),
        ("tripwire", False, "tripwire"),
        ("tripwire", True, "tripwire"),
        ("ask", False, "block"),
        ("ask", True, "interrupt"),
    ],
)
def test_actions(action: str, can_suspend: bool, expected: str) -> None:
    compiled = compile_inline(
        {"id": "r", "pattern": "x", "action": action}, can_suspend=can_suspend
    )
    assert decisions(compiled, "t", {"a": "x"})["pack:house/r"].action == expected


def test_action_defaults_to_deny() -> None:
    compiled = compile_inline({"id": "r", "pattern": "x"})
    assert compiled.refs[0]["rules"] == [{"id": "r", "pattern": "x", "action": "deny"}]


@pytest.mark.parametrize(
    ("rule", "tool", "arguments", "fires"),
    [
        ({"tool": "shell"}, "shell", {"c": "danger"}, True),
        ({"tool": "shell"}, "write", {"c": "danger"}, False),
        ({"tool": ["a", "b"]}, "b", {"c": "danger"}, True),
        ({"tool": ["a", "b"]}, "c", {"c": "danger"}, False),
        ({"arg_path": "c"}, "t", {"c": "danger"}, True),
        ({"arg_path": "c"}, "t", {"d": "danger"}, False),
        ({"arg_path": "opts.cmd"}, "t", {"opts": {"cmd": "danger"}}, True),
        ({"arg_path": "opts.cmd"}, "t", {"opts": {"other": "danger"}}, False),
        ({"arg_path": "argv.1"}, "t", {"argv": ["ls", "danger"]}, True),
        ({"arg_path": "argv.5"}, "t", {"argv": ["ls", "danger"]}, False),
        ({"arg_path": ["x", "y"]}, "t", {"y": ["ok", {"deep": "danger"}]}, True),
        ({"arg_path": "x"}, "t", {"x": 3}, False),
        ({}, "t", {"list": [{"nested": ["danger"]}]}, True),
        ({}, "t", {"danger": 1}, True),
        ({}, "t", {"n": 1, "b": True, "z": None}, False),
    ],
)
def test_tool_and_arg_path_matching(
    rule: dict[str, Any], tool: str, arguments: dict[str, Any], fires: bool
) -> None:
    compiled = compile_inline({"id": "r", "pattern": "danger", **rule})
    assert (decisions(compiled, tool, arguments)["pack:house/r"].action != "allow") is fires


def test_deny_predicates_see_a_copy_of_the_arguments_and_a_context() -> None:
    seen: list[Any] = []

    def deny(args: dict[str, Any], ctx: Any) -> bool:
        seen.append(ctx)
        args["path"] = "changed"
        args["nested"]["k"] = "changed"
        return args.get("force") is True

    compiled = compile_inline({"id": "r", "tool": "rm", "deny": deny})
    context = call_context("rm", {"path": "a", "nested": {"k": "v"}})
    assert compiled.tool_input[0].evaluate(context).action == "allow"
    assert context.value.arguments == {"path": "a", "nested": {"k": "v"}}
    [ctx] = seen
    assert (ctx.pack, ctx.rule, ctx.version, ctx.tool_name) == ("house", "r", 1, "rm")
    assert ctx.options == {}
    assert ctx.state is None
    assert ctx.guardrail is context
    assert (
        compiled.tool_input[0].evaluate(call_context("rm", {"force": True, "nested": {}})).action
        == "block"
    )


@pytest.mark.anyio
async def test_records_through_the_engine_are_redacted_and_fail_closed() -> None:
    def broken(args: dict[str, Any], ctx: Any) -> bool:
        raise RuntimeError("boom")

    compiled = compile_guardrail_packs(
        [
            inline({"id": "broken", "tool": "b", "deny": broken}),
            inline(
                {"id": "x", "pattern": "secret-value", "reason": "no secret-value"}, pack_id="p"
            ),
        ],
        catalogue={},
    )
    redactor = create_secret_redactor(["secret-value"])
    records = await evaluate_guardrails(
        compiled.tool_input, call_context("t", {"a": "secret-value"}), redactor=redactor
    )
    assert [(r.guardrail, r.action, r.reason) for r in records] == [
        ("pack:house/broken", "allow", None),
        ("pack:p/x", "block", "no [REDACTED]"),
    ]
    assert records[1].metadata == {"pack": "p", "rule": "x", "version": 1}
    [failed] = await evaluate_guardrails(compiled.tool_input, call_context("b", {}))
    assert (failed.action, failed.reason) == ("tripwire", "guardrail_failed")


# -- refusal text ------------------------------------------------------------------------------


def test_refusal_without_a_reason_of_its_own() -> None:
    compiled = compile_inline({"id": "no-x", "pattern": "x"})
    record = record_for(compiled, "t", {"a": "x"})
    assert pack_refusal_message(record) == "Blocked by guardrail rule pack:house/no-x"


def test_refusal_with_the_rule_reason() -> None:
    compiled = compile_packs(["destructive-commands"])
    record = record_for(compiled, "shell", {"command": "git push --force"})
    assert pack_refusal_message(record) == (
        "Blocked by guardrail rule pack:destructive-commands/no-force-push: "
        "Force pushes are not allowed; use --force-with-lease"
    )


def test_refusal_never_echoes_the_arguments() -> None:
    compiled = compile_packs(["secrets-hygiene"])
    token = "ghp_" + "S" * 36
    record = record_for(compiled, "shell", {"command": f"curl -H 'token {token}' x"})
    message = pack_refusal_message(record)
    assert message is not None
    assert token not in message
    assert "curl" not in message


def test_refusal_is_redacted() -> None:
    compiled = compile_inline({"id": "r", "pattern": "x", "reason": "ask hunter2 for access"})
    record = record_for(compiled, "t", {"a": "x"})
    redactor = create_secret_redactor(["hunter2"])
    assert pack_refusal_message(record, redactor) == (
        "Blocked by guardrail rule pack:house/r: ask [REDACTED] for access"
    )
    assert compile_inline(
        {"id": "r", "pattern": "x", "reason": "ask hunter2 for access"}, redactor=redactor
    ).refusal_message(record) == pack_refusal_message(record, redactor)


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_refusal_is_cut_to_200_bytes_on_a_character_boundary(char: str) -> None:
    compiled = compile_inline({"id": "r", "pattern": "x", "reason": char * 120})
    message = pack_refusal_message(record_for(compiled, "t", {"a": "x"}))
    assert message is not None
    encoded = message.encode("utf-8")
    assert len(encoded) <= MAX_PACK_REFUSAL_BYTES
    assert len(encoded) > MAX_PACK_REFUSAL_BYTES - len(char.encode("utf-8"))
    assert message.startswith("Blocked by guardrail rule pack:house/r: " + char)
    assert message.endswith(char)


def test_ids_at_the_limit_still_fit() -> None:
    pack_id, rule_id = "p" * 96, "r" * 96
    compiled = compile_guardrail_packs(
        [{"id": pack_id, "rules": [{"id": rule_id, "pattern": "x"}]}], catalogue={}
    )
    message = pack_refusal_message(record_for(compiled, "t", {"a": "x"}))
    assert message is not None
    assert len(message.encode("utf-8")) == MAX_PACK_REFUSAL_BYTES


@pytest.mark.parametrize(
    "record",
    [
        GuardrailRecord("my-guard", "tool_input", "block", "no"),
        GuardrailRecord("my-guard", "tool_input", "block", "no", {"pack": "p", "rule": "r"}),
        GuardrailRecord("pack:p/r", "tool_input", "block", "no", {"pack": "p"}),
        GuardrailRecord("pack:p/r", "tool_input", "allow", None, {"pack": "p", "rule": "r"}),
    ],
)
def test_records_not_from_a_fired_pack_rule_have_no_refusal(record: GuardrailRecord) -> None:
    assert pack_refusal_message(record) is None
