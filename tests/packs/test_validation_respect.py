"""validation-respect: state transitions through the tool_output observer, and its codec."""

from __future__ import annotations

import pytest

from prism_core import ErrorInfo
from prism_core.errors import GuardrailPackError
from prism_core.guardrails import CompiledGuardrailPacks

from ._support import compile_packs, fired, observe

RULE = "pack:validation-respect/no-mutation-after-failed-validation"
MUTATIONS = [
    ("write", {"path": "a.py"}),
    ("edit", {"path": "a.py"}),
    ("delete", {"path": "a.py"}),
    ("move", {"from": "a", "to": "b"}),
    ("shell", {"command": "ls"}),
]


@pytest.fixture
def compiled() -> CompiledGuardrailPacks:
    return compile_packs(["validation-respect"])


def test_one_allow_only_observer_is_compiled(compiled: CompiledGuardrailPacks) -> None:
    [observer] = compiled.tool_output
    assert observer.name == "pack-state:validation-respect"
    assert observer.stage == "tool_output"
    assert observer.revision == "validation-respect@1"


@pytest.mark.parametrize(("tool", "arguments"), MUTATIONS)
def test_mutations_pass_before_any_validation(
    compiled: CompiledGuardrailPacks, tool: str, arguments: dict[str, str]
) -> None:
    assert fired(compiled, tool, arguments) == set()


@pytest.mark.parametrize(("tool", "arguments"), MUTATIONS)
def test_mutations_are_refused_after_a_failed_validation(
    compiled: CompiledGuardrailPacks, tool: str, arguments: dict[str, str]
) -> None:
    observe(compiled, "test", {"exit_code": 1, "output": "2 failed"})
    assert compiled.state_of("validation-respect") == "test"
    assert fired(compiled, tool, arguments) == {RULE}


def test_a_tool_error_is_a_failure(compiled: CompiledGuardrailPacks) -> None:
    observe(compiled, "lint", error=ErrorInfo("linter crashed"))
    assert compiled.state_of("validation-respect") == "lint"
    assert fired(compiled, "write", {"path": "a.py"}) == {RULE}


def test_reads_and_validations_pass_while_failed(compiled: CompiledGuardrailPacks) -> None:
    observe(compiled, "typecheck", {"exit_code": 2})
    assert fired(compiled, "read", {"path": "a.py"}) == set()
    assert fired(compiled, "typecheck", {}) == set()


def test_a_passing_validation_clears_the_failure(compiled: CompiledGuardrailPacks) -> None:
    observe(compiled, "test", {"exit_code": 1})
    observe(compiled, "check", {"exit_code": 0})
    assert compiled.state_of("validation-respect") is None
    assert fired(compiled, "write", {"path": "a.py"}) == set()


@pytest.mark.parametrize("value", [{"exit_code": 0}, {"ok": True}, "all good", None, [1]])
def test_passing_results(compiled: CompiledGuardrailPacks, value: object) -> None:
    observe(compiled, "run_tests", value)
    assert compiled.state_of("validation-respect") is None


def test_other_tools_leave_the_state_alone(compiled: CompiledGuardrailPacks) -> None:
    observe(compiled, "validate", {"exit_code": 3})
    observe(compiled, "shell", {"exit_code": 0})
    observe(compiled, "write", error=ErrorInfo("disk full"))
    assert compiled.state_of("validation-respect") == "validate"


def test_validation_tools_option() -> None:
    compiled = compile_packs(
        [{"id": "validation-respect", "options": {"validation_tools": ["ci"]}}]
    )
    observe(compiled, "test", {"exit_code": 1})
    assert compiled.state_of("validation-respect") is None
    observe(compiled, "ci", {"exit_code": 1})
    assert fired(compiled, "edit", {"path": "a"}) == {RULE}
    assert compiled.refs == (
        {"id": "validation-respect", "version": 1, "options": {"validation_tools": ["ci"]}},
    )


def test_a_validation_tool_that_is_also_a_mutation_can_rerun() -> None:
    compiled = compile_packs(
        [{"id": "validation-respect", "options": {"validation_tools": ["shell"]}}]
    )
    observe(compiled, "shell", {"exit_code": 1})
    assert fired(compiled, "shell", {"command": "pytest"}) == set()
    assert fired(compiled, "write", {"path": "a"}) == {RULE}


def test_state_codec_round_trip(compiled: CompiledGuardrailPacks) -> None:
    assert compiled.snapshot_state() == {"validation-respect": {"validation_failed": None}}
    observe(compiled, "test", {"exit_code": 1})
    snapshot = compiled.snapshot_state()
    assert snapshot == {"validation-respect": {"validation_failed": "test"}}

    resumed = compile_packs(["validation-respect"])
    assert fired(resumed, "write", {"path": "a"}) == set()
    resumed.restore_state(snapshot)
    assert resumed.state_of("validation-respect") == "test"
    assert fired(resumed, "write", {"path": "a"}) == {RULE}
    resumed.restore_state({"validation-respect": {"validation_failed": None}})
    assert fired(resumed, "write", {"path": "a"}) == set()


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {},
        {"validation_failed": 3},
        {"validation_failed": ""},
        {"validation_failed": "test", "extra": 1},
    ],
)
def test_malformed_state_is_refused_and_changes_nothing(
    compiled: CompiledGuardrailPacks, data: object
) -> None:
    observe(compiled, "test", {"exit_code": 1})
    with pytest.raises(GuardrailPackError) as caught:
        compiled.restore_state({"validation-respect": data})
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_PACK"
    assert compiled.state_of("validation-respect") == "test"


def test_each_compilation_has_its_own_state() -> None:
    first, second = compile_packs(["validation-respect"]), compile_packs(["validation-respect"])
    observe(first, "test", {"exit_code": 1})
    assert second.state_of("validation-respect") is None
