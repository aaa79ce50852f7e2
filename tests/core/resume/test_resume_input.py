"""Resume input validation: shapes, limits, duplicates, hostile values and secret-free messages."""

from __future__ import annotations

import decimal
import enum
import fractions
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from prism_core.errors import AgentDecisionError
from prism_core.resume._input import (
    MAX_APPROVAL_ID_CHARS,
    MAX_DECISION_BATCH,
    MAX_DECISION_PAYLOAD_BYTES,
    MAX_DECISION_REASON_BYTES,
    MAX_EXPECTED_VERSION,
    AgentRunRef,
    ResumeInput,
    RunDecision,
    coerce_run_ref,
    validate_resume_input,
)

INVALID = "ERR_PRISM_DECISION_INVALID"
LIMIT = "ERR_PRISM_DECISION_LIMIT"
DUPLICATE = "ERR_PRISM_DECISION_DUPLICATE"
SECRET = "SECRET-ID-123"
SECRETS = (SECRET, "SECRET-REASON", "SECRET-PAYLOAD", "SECRET-KEY")


def entry(**fields: Any) -> dict[str, Any]:
    """A batch entry: ``allow_once`` on approval ``a1`` unless overridden."""
    return {"approval_id": "a1", "outcome": "allow_once", **fields}


def batch(*entries: Any, version: Any = 1) -> dict[str, Any]:
    """A batch resume input."""
    return {"expected_version": version, "decisions": list(entries)}


def nested_list(depth: int) -> Any:
    """``depth`` lists nested in each other, built without recursion."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    """``depth`` dicts nested in each other under the key ``"k"``."""
    value: Any = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def rejects(value: object, code: str) -> AgentDecisionError:
    """Assert validating ``value`` raises exactly ``AgentDecisionError`` with ``code``."""
    with pytest.raises(AgentDecisionError) as caught:
        validate_resume_input(value)
    assert type(caught.value) is AgentDecisionError
    assert caught.value.code == code, caught.value.message
    return caught.value


# --- hostile helpers -------------------------------------------------------------------------


class Boom(Exception):
    """What the hostile helpers raise."""


class HostileEq:
    """Raises from every comparison and from hashing."""

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")

    def __hash__(self) -> int:
        raise Boom("hash")


class HostileContainer:
    """Looks like a collection whose every protocol method raises."""

    def __len__(self) -> int:
        raise Boom("len")

    def __iter__(self) -> Iterator[Any]:
        raise Boom("iter")

    def __getitem__(self, key: object) -> Any:
        raise Boom("getitem")

    def keys(self) -> Any:
        raise Boom("keys")


class HostileMapping(Mapping[Any, Any]):
    """A registered ``Mapping`` whose every method raises."""

    def __getitem__(self, key: object) -> Any:
        raise Boom("getitem")

    def __iter__(self) -> Iterator[Any]:
        raise Boom("iter")

    def __len__(self) -> int:
        raise Boom("len")


class EndlessMapping(Mapping[str, Any]):
    """A mapping with infinitely many keys."""

    def __getitem__(self, key: str) -> Any:
        return 1

    def __iter__(self) -> Iterator[str]:
        number = 0
        while True:
            number += 1
            yield f"k{number}"

    def __len__(self) -> int:
        return 3


class GetitemRaisesMapping(Mapping[str, Any]):
    """Lists ``expected_version`` as a key, then raises when it is read."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(SECRET)

    def __iter__(self) -> Iterator[str]:
        return iter(["expected_version"])

    def __len__(self) -> int:
        return 1


class SecretRaisingMapping(Mapping[str, Any]):
    """Raises an ``AgentDecisionError`` of its own whose message holds a secret."""

    def __getitem__(self, key: str) -> Any:
        raise AgentDecisionError(f"leak {SECRET}", code=DUPLICATE)

    def __iter__(self) -> Iterator[str]:
        return iter(["expected_version"])

    def __len__(self) -> int:
        return 1


class PairsMapping(Mapping[Any, Any]):
    """One key/value pair, held without hashing the key (so any value can be a key)."""

    def __init__(self, key: object, value: object) -> None:
        self.key = key
        self.value = value

    def __getitem__(self, key: object) -> Any:
        if key is self.key:
            return self.value
        raise KeyError("absent")

    def __iter__(self) -> Iterator[Any]:
        return iter([self.key])

    def __len__(self) -> int:
        return 1


class ItemsRaisesDict(dict[Any, Any]):
    """A dict whose overridden views and iteration raise."""

    def items(self) -> Any:
        raise Boom("items")

    def keys(self) -> Any:
        raise Boom("keys")

    def __iter__(self) -> Iterator[Any]:
        raise Boom("iter")

    def __len__(self) -> int:
        raise Boom("len")

    def __getitem__(self, key: object) -> Any:
        raise Boom("getitem")


class HostileList(list[Any]):
    """A list whose overridden protocol methods raise."""

    def __iter__(self) -> Iterator[Any]:
        raise Boom("iter")

    def __len__(self) -> int:
        raise Boom("len")

    def __getitem__(self, key: Any) -> Any:
        raise Boom("getitem")


class HostileStr(str):
    """A string whose comparisons, hash and conversions raise."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")

    def __hash__(self) -> int:
        raise Boom("hash")

    def __str__(self) -> str:
        raise Boom("str")

    def __len__(self) -> int:
        raise Boom("len")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise Boom("encode")


class OddHashStr(str):
    """A string with its own hash whose comparisons and conversions raise."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")

    def __hash__(self) -> int:
        return 7

    def __str__(self) -> str:
        raise Boom("str")


class HostileInt(int):
    """An int whose comparisons, hash and conversions raise."""

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")

    def __hash__(self) -> int:
        raise Boom("hash")

    def __lt__(self, other: object) -> bool:
        raise Boom("lt")

    def __gt__(self, other: object) -> bool:
        raise Boom("gt")

    def __int__(self) -> int:
        raise Boom("int")

    def __index__(self) -> int:
        raise Boom("index")


class HostileFloat(float):
    """A float whose conversions raise."""

    def __float__(self) -> float:
        raise Boom("float")

    def __repr__(self) -> str:
        raise Boom("repr")


class LyingClass:
    """Claims to be a dict through ``__class__``."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return dict

    def __getattr__(self, name: str) -> Any:
        raise Boom(name)


class ClassRaises:
    """Raises when asked for its ``__class__``."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise Boom("class")


class GetattrRaises:
    """Raises for every attribute it does not have."""

    def __getattr__(self, name: str) -> Any:
        raise Boom(name)


class Color(enum.IntEnum):
    """An int enum."""

    RED = 1


class Approve(enum.Enum):
    """A plain enum."""

    APPROVE = "approve"


def cyclic_dict() -> dict[str, Any]:
    """A dict that contains itself."""
    value: dict[str, Any] = {"expected_version": 1}
    value["decisions"] = value
    value["self"] = value
    return value


def cyclic_list() -> list[Any]:
    """A list that contains itself."""
    value: list[Any] = []
    value.append(value)
    return value


def generator() -> Iterator[Any]:
    """A generator that would yield a valid entry."""
    yield entry()


def hostile_values() -> list[tuple[str, object]]:
    """Weird values, built fresh for every use."""
    str_subclass_key_dict = {"decision": "approve", OddHashStr("decision"): "deny"}
    return [
        ("none", None),
        ("str", "approve"),
        ("empty-str", ""),
        ("secret-str", SECRET),
        ("bytes", b"approve"),
        ("bytearray", bytearray(b"x")),
        ("memoryview", memoryview(b"x")),
        ("zero", 0),
        ("one", 1),
        ("negative", -1),
        ("true", True),
        ("false", False),
        ("float", 1.5),
        ("nan", float("nan")),
        ("inf", float("inf")),
        ("-inf", float("-inf")),
        ("huge-int", 2**4096),
        ("huge-decimal-int", 10**5000),
        ("complex", 1j),
        ("empty-list", []),
        ("list", [1, 2]),
        ("empty-tuple", ()),
        ("set", {1}),
        ("frozenset", frozenset({"a"})),
        ("empty-dict", {}),
        ("int-keys", {1: 2}),
        ("none-key", {None: 1}),
        ("tuple-key", {(1, 2): 3}),
        ("cyclic-dict", cyclic_dict()),
        ("cyclic-list", cyclic_list()),
        ("deep-list", nested_list(10_000)),
        ("deep-dict", nested_dict(10_000)),
        ("generator", generator()),
        ("range", range(3)),
        ("object", object()),
        ("hostile-eq", HostileEq()),
        ("hostile-container", HostileContainer()),
        ("hostile-mapping", HostileMapping()),
        ("endless-mapping", EndlessMapping()),
        ("getitem-raises", GetitemRaisesMapping()),
        ("secret-raising-mapping", SecretRaisingMapping()),
        ("items-raises-dict", ItemsRaisesDict(expected_version=1, decision="approve")),
        ("items-raises-dict-bad", ItemsRaisesDict(bogus=1)),
        ("hostile-list", HostileList([entry()])),
        ("hostile-str", HostileStr("approve")),
        ("hostile-str-key-dict", str_subclass_key_dict),
        ("hostile-int", HostileInt(1)),
        ("hostile-float", HostileFloat(1.0)),
        ("lying-class", LyingClass()),
        ("class-raises", ClassRaises()),
        ("getattr-raises", GetattrRaises()),
        ("int-enum", Color.RED),
        ("enum", Approve.APPROVE),
        ("decimal", decimal.Decimal("1")),
        ("fraction", fractions.Fraction(1, 3)),
        ("mappingproxy", types.MappingProxyType({"expected_version": 1, "decision": "deny"})),
        ("huge-str", "x" * 10_000_000),
        ("lone-surrogate", "\ud800"),
        ("type", dict),
        ("function", lambda: None),
        ("exception", Boom("x")),
        ("ellipsis", ...),
        ("bad-resume-input", ResumeInput(expected_version="1", decision="x")),  # type: ignore[arg-type]
        ("bad-run-decision", RunDecision(approval_id=5, outcome="bad")),  # type: ignore[arg-type]
        ("run-ref", AgentRunRef(SECRET, SECRET)),
    ]


def contexts() -> list[tuple[str, Callable[[object], object]]]:
    """Places a hostile value can sit in a resume input or a run reference."""
    return [
        ("top", validate_resume_input),
        (
            "expected_version",
            lambda v: validate_resume_input({"expected_version": v, "decision": "deny"}),
        ),
        ("decision", lambda v: validate_resume_input({"expected_version": 1, "decision": v})),
        ("decisions", lambda v: validate_resume_input({"expected_version": 1, "decisions": v})),
        ("entry", lambda v: validate_resume_input(batch(v))),
        ("entry-after-valid", lambda v: validate_resume_input(batch(entry(approval_id="z"), v))),
        ("approval_id", lambda v: validate_resume_input(batch(entry(approval_id=v)))),
        ("outcome", lambda v: validate_resume_input(batch(entry(outcome=v)))),
        ("reason", lambda v: validate_resume_input(batch(entry(reason=v)))),
        ("arguments", lambda v: validate_resume_input(batch(entry(modified_arguments=v)))),
        ("elicitation", lambda v: validate_resume_input(batch(entry(elicitation=v)))),
        ("payload-value", lambda v: validate_resume_input(batch(entry(elicitation={"k": v})))),
        ("payload-list", lambda v: validate_resume_input(batch(entry(elicitation={"k": [1, v]})))),
        (
            "payload-key",
            lambda v: validate_resume_input(batch(entry(elicitation=PairsMapping(v, 1)))),
        ),
        ("run-ref", coerce_run_ref),
        ("run-id", lambda v: coerce_run_ref({"run_id": v, "session_id": "s"})),
    ]


# --- valid input -----------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "deny", "continue"])
def test_legacy_decisions_round_trip(decision: str) -> None:
    """Each legacy decision becomes a ``ResumeInput`` with ``decision`` set."""
    result = validate_resume_input({"expected_version": 7, "decision": decision})
    assert result == ResumeInput(expected_version=7, decision=decision)  # type: ignore[arg-type]


def test_legacy_decision_with_none_decisions_is_valid() -> None:
    """A ``decisions`` key holding ``None`` counts as absent."""
    result = validate_resume_input({"expected_version": 2, "decision": "deny", "decisions": None})
    assert result == ResumeInput(expected_version=2, decision="deny")


def test_batch_round_trips() -> None:
    """Batch entries become ``RunDecision`` values with every field carried over."""
    result = validate_resume_input(
        {
            "expected_version": 4,
            "decision": None,
            "decisions": [
                entry(approval_id="a1", outcome="allow_once"),
                entry(approval_id="a2", outcome="allow_for_run", modified_arguments={"x": [1]}),
                entry(approval_id="a3", outcome="reject_once", reason="no"),
                entry(approval_id="a4", outcome="reject_for_run", reason=None),
                entry(approval_id="a5", outcome="allow_once", elicitation={"answer": "yes"}),
            ],
        }
    )
    assert result == ResumeInput(
        expected_version=4,
        decisions=(
            RunDecision(approval_id="a1", outcome="allow_once"),
            RunDecision(approval_id="a2", outcome="allow_for_run", modified_arguments={"x": [1]}),
            RunDecision(approval_id="a3", outcome="reject_once", reason="no"),
            RunDecision(approval_id="a4", outcome="reject_for_run"),
            RunDecision(approval_id="a5", outcome="allow_once", elicitation={"answer": "yes"}),
        ),
    )


def test_batch_accepts_tuples_and_run_decisions() -> None:
    """A tuple batch may mix mappings and ``RunDecision`` values."""
    decision = RunDecision(approval_id="b", outcome="reject_once", reason="why")
    result = validate_resume_input(
        {"expected_version": 1, "decisions": (entry(approval_id="a"), decision)}
    )
    assert result.decisions == (RunDecision(approval_id="a", outcome="allow_once"), decision)


def test_resume_input_instances_are_accepted() -> None:
    """A valid ``ResumeInput`` validates to an equal value."""
    value = ResumeInput(
        expected_version=3,
        decisions=(RunDecision(approval_id="a", outcome="allow_once", elicitation={"k": 1}),),
    )
    assert validate_resume_input(value) == value
    legacy = ResumeInput(expected_version=1, decision="continue")
    assert validate_resume_input(legacy) == legacy


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (ResumeInput(expected_version=0, decision="approve"), INVALID),
        (ResumeInput(expected_version=True, decision="approve"), INVALID),
        (ResumeInput(expected_version=1, decision="sideways"), INVALID),  # type: ignore[arg-type]
        (ResumeInput(expected_version=1), INVALID),
        (
            ResumeInput(
                expected_version=1,
                decision="approve",
                decisions=(RunDecision(approval_id="a", outcome="allow_once"),),
            ),
            INVALID,
        ),
        (ResumeInput(expected_version=1, decisions=()), INVALID),
        (ResumeInput(expected_version=1, decisions=[{"bogus": 1}]), INVALID),  # type: ignore[arg-type]
        (
            ResumeInput(
                expected_version=1, decisions=(RunDecision(approval_id="", outcome="allow_once"),)
            ),
            INVALID,
        ),
        (
            ResumeInput(
                expected_version=1,
                decisions=(RunDecision(approval_id="a", outcome="maybe"),),  # type: ignore[arg-type]
            ),
            INVALID,
        ),
        (
            ResumeInput(
                expected_version=1,
                decisions=(RunDecision(approval_id="a", outcome="allow_once", reason="x" * 3000),),
            ),
            LIMIT,
        ),
        (
            ResumeInput(
                expected_version=1,
                decisions=(
                    RunDecision(
                        approval_id="a",
                        outcome="allow_once",
                        modified_arguments={"k": {1, 2}},
                    ),
                ),
            ),
            INVALID,
        ),
        (
            ResumeInput(
                expected_version=1,
                decisions=(
                    RunDecision(approval_id="a", outcome="allow_once"),
                    RunDecision(approval_id="a", outcome="reject_once"),
                ),
            ),
            DUPLICATE,
        ),
    ],
)
def test_instances_are_revalidated(value: ResumeInput, code: str) -> None:
    """``ResumeInput`` and ``RunDecision`` values built with bad fields are refused."""
    rejects(value, code)


def test_subclasses_are_normalised_to_plain_types() -> None:
    """str and int subclasses come back as plain ``str`` and ``int``."""

    class Text(str):
        """A harmless str subclass."""

        __slots__ = ()

    result = validate_resume_input(
        {
            Text("expected_version"): Color.RED,
            "decisions": [
                {
                    "approval_id": Text("a"),
                    "outcome": Text("allow_once"),
                    "reason": Text("r"),
                    "modified_arguments": {Text("k"): [Color.RED, Text("v")]},
                }
            ],
        }
    )
    assert type(result.expected_version) is int
    assert result.decisions is not None
    decision = result.decisions[0]
    assert [type(decision.approval_id), type(decision.outcome), type(decision.reason)] == [str] * 3
    assert decision.modified_arguments == {"k": [1, "v"]}
    assert type(decision.modified_arguments["k"][0]) is int
    assert type(decision.modified_arguments["k"][1]) is str


def test_mapping_types_other_than_dict_are_accepted() -> None:
    """Any ``Mapping`` works at every level, and a dict's overridden methods are not trusted."""
    result = validate_resume_input(
        types.MappingProxyType(
            {
                "expected_version": 1,
                "decisions": [
                    types.MappingProxyType(
                        {"approval_id": "a", "outcome": "allow_once", "elicitation": {"k": 1}}
                    )
                ],
            }
        )
    )
    assert result.decisions == (
        RunDecision(approval_id="a", outcome="allow_once", elicitation={"k": 1}),
    )
    assert validate_resume_input(
        ItemsRaisesDict(expected_version=1, decision="approve")
    ) == ResumeInput(expected_version=1, decision="approve")


def test_payload_copies_are_detached() -> None:
    """Mutating the caller's payload afterwards does not change the validated decision."""
    arguments: dict[str, Any] = {"path": "/tmp/a", "nested": {"items": [1, 2]}, "pair": (1, 2)}
    elicitation: dict[str, Any] = {"answer": ["yes"]}
    result = validate_resume_input(
        batch(
            entry(approval_id="a", modified_arguments=arguments),
            entry(approval_id="b", elicitation=elicitation),
        )
    )
    arguments["path"] = "/etc/passwd"
    arguments["nested"]["items"].append(3)
    elicitation["answer"].append("no")
    assert result.decisions is not None
    first, second = result.decisions
    assert first.modified_arguments == {
        "path": "/tmp/a",
        "nested": {"items": [1, 2]},
        "pair": [1, 2],
    }
    assert first.modified_arguments is not arguments
    assert second.elicitation == {"answer": ["yes"]}


def test_payload_copies_of_run_decisions_are_detached() -> None:
    """A ``RunDecision`` payload is copied too, not shared with the input instance."""
    arguments: dict[str, Any] = {"k": [1]}
    decision = RunDecision(approval_id="a", outcome="allow_once", modified_arguments=arguments)
    result = validate_resume_input({"expected_version": 1, "decisions": [decision]})
    arguments["k"].append(2)
    assert result.decisions is not None
    assert result.decisions[0].modified_arguments == {"k": [1]}


# --- top level -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, "approve", b"{}", 1, 1.0, True, [], [("expected_version", 1)], {"expected_version"}],
    ids=["none", "str", "bytes", "int", "float", "bool", "list", "pairs", "set"],
)
def test_non_mapping_input_is_invalid(value: object) -> None:
    """A resume input that is not a mapping or ``ResumeInput`` is invalid."""
    rejects(value, INVALID)


def test_unknown_top_level_key_is_invalid() -> None:
    """Keys other than expected_version, decision and decisions are refused."""
    rejects({"expected_version": 1, "decision": "approve", "extra": 1}, INVALID)
    rejects({"expected_version": 1, "decision": "approve", 5: 1}, INVALID)


def test_misspelt_key_gets_a_hint() -> None:
    """A camel-case key is named as the snake-case key it stands for."""
    error = rejects({"expectedVersion": 1, "decision": "approve"}, INVALID)
    assert "did you mean expected_version" in error.message


def test_huge_mapping_fails_without_reading_every_key() -> None:
    """A mapping with endless keys is refused as having unknown keys."""
    rejects(EndlessMapping(), INVALID)


@pytest.mark.parametrize(
    "version",
    [None, "1", 1.0, True, False, 0, -1, MAX_EXPECTED_VERSION + 1, 2**200, [1], float("nan")],
    ids=["none", "str", "float", "true", "false", "zero", "neg", "over", "huge", "list", "nan"],
)
def test_bad_expected_version_is_invalid(version: object) -> None:
    """expected_version must be an int (not a bool) from 1 to 2**53 - 1."""
    rejects({"expected_version": version, "decision": "approve"}, INVALID)


def test_missing_expected_version_is_invalid() -> None:
    """expected_version is required."""
    rejects({"decision": "approve"}, INVALID)


@pytest.mark.parametrize("version", [1, MAX_EXPECTED_VERSION])
def test_expected_version_bounds_are_valid(version: int) -> None:
    """1 and 2**53 - 1 are both accepted."""
    assert validate_resume_input({"expected_version": version, "decision": "approve"}) == (
        ResumeInput(expected_version=version, decision="approve")
    )


@pytest.mark.parametrize(
    "value",
    [
        {"expected_version": 1},
        {"expected_version": 1, "decision": None, "decisions": None},
        {"expected_version": 1, "decision": "approve", "decisions": [entry()]},
        {"expected_version": 1, "decision": "approve", "decisions": []},
    ],
    ids=["neither", "both-none", "both", "both-empty-batch"],
)
def test_exactly_one_of_decision_and_decisions(value: dict[str, Any]) -> None:
    """Neither or both of decision and decisions is invalid."""
    rejects(value, INVALID)


@pytest.mark.parametrize(
    "decision",
    ["sideways", "", "APPROVE", "approve ", 1, True, ["approve"], Approve.APPROVE, b"approve"],
)
def test_unknown_legacy_decision_is_invalid(decision: object) -> None:
    """decision must be exactly approve, deny or continue."""
    rejects({"expected_version": 1, "decision": decision}, INVALID)


# --- the batch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decisions",
    ["a1", b"a1", {"approval_id": "a1", "outcome": "allow_once"}, {"a1"}, 1, generator(), []],
    ids=["str", "bytes", "mapping", "set", "int", "generator", "empty"],
)
def test_decisions_must_be_a_non_empty_list_or_tuple(decisions: object) -> None:
    """decisions must be a non-empty list or tuple."""
    rejects({"expected_version": 1, "decisions": decisions}, INVALID)


def test_batch_size_limit() -> None:
    """128 entries are accepted and 129 are over the limit."""
    entries = [entry(approval_id=f"a{index}") for index in range(MAX_DECISION_BATCH)]
    result = validate_resume_input(batch(*entries))
    assert result.decisions is not None
    assert len(result.decisions) == MAX_DECISION_BATCH
    error = rejects(batch(*entries, entry(approval_id="extra")), LIMIT)
    assert "129" in error.message


def test_batch_size_is_checked_before_entries() -> None:
    """A ten-million-entry batch of garbage fails on its size, not on its first entry."""
    rejects({"expected_version": 1, "decisions": [0] * 10_000_000}, LIMIT)


@pytest.mark.parametrize(
    "value", ["a1", 1, None, ["approval_id", "a1"], ("a1", "allow_once"), {"a1"}, b"a1"]
)
def test_entry_must_be_a_mapping_or_run_decision(value: object) -> None:
    """An entry that is not a mapping or ``RunDecision`` is invalid."""
    rejects(batch(value), INVALID)


def test_unknown_entry_key_is_invalid() -> None:
    """Entry keys other than the five known ones are refused."""
    rejects(batch(entry(approvalId="a1")), INVALID)
    rejects(batch(entry(**{"": 1})), INVALID)
    rejects(batch({**entry(), 3: 1}), INVALID)


@pytest.mark.parametrize("approval_id", [None, "", 5, b"a1", ["a1"], "\ud800"], ids=str)
def test_bad_approval_id_is_invalid(approval_id: object) -> None:
    """approval_id must be a non-empty string of valid Unicode."""
    rejects(batch(entry(approval_id=approval_id)), INVALID)


def test_missing_approval_id_is_invalid() -> None:
    """approval_id is required."""
    rejects(batch({"outcome": "allow_once"}), INVALID)


def test_approval_id_length_limit() -> None:
    """An approval id of 128 characters passes and one of 129 is over the limit."""
    longest = "i" * MAX_APPROVAL_ID_CHARS
    result = validate_resume_input(batch(entry(approval_id=longest)))
    assert result.decisions is not None
    assert result.decisions[0].approval_id == longest
    rejects(batch(entry(approval_id=longest + "i")), LIMIT)


@pytest.mark.parametrize(
    "outcome", [None, "allow", "ALLOW_ONCE", "approve", 1, ["allow_once"], b"allow_once"]
)
def test_bad_outcome_is_invalid(outcome: object) -> None:
    """outcome must be one of the four outcomes."""
    rejects(batch(entry(outcome=outcome)), INVALID)


def test_missing_outcome_is_invalid() -> None:
    """outcome is required."""
    rejects(batch({"approval_id": "a1"}), INVALID)


@pytest.mark.parametrize("reason", [1, b"why", ["why"], {"why": 1}, "\ud800", "ok\udfff"])
def test_bad_reason_is_invalid(reason: object) -> None:
    """reason must be a string of valid Unicode."""
    rejects(batch(entry(reason=reason)), INVALID)


def test_reason_byte_limit() -> None:
    """The reason cap counts UTF-8 bytes, not characters."""
    at_limit = "é" * (MAX_DECISION_REASON_BYTES // 2)
    result = validate_resume_input(batch(entry(reason=at_limit)))
    assert result.decisions is not None
    assert result.decisions[0].reason == at_limit
    error = rejects(batch(entry(reason=at_limit + "é")), LIMIT)
    assert "2050 bytes" in error.message
    assert "decisions[0].reason" in error.message
    rejects(batch(entry(reason="x" * (MAX_DECISION_REASON_BYTES + 1))), LIMIT)
    rejects(batch(entry(reason="x" * 50_000_000)), LIMIT)


def test_error_names_the_entry_index() -> None:
    """Messages say which entry is at fault."""
    entries = [entry(approval_id=f"a{index}") for index in range(3)]
    entries.append(entry(approval_id="a3", reason="x" * 2100))
    error = rejects(batch(*entries), LIMIT)
    assert error.message == "decisions[3].reason is 2100 bytes; the limit is 2048"


@pytest.mark.parametrize(
    "payload",
    [
        [1],
        "k",
        1,
        {1: "v"},
        {"k": {2: "v"}},
        {"k": float("nan")},
        {"k": float("inf")},
        {"k": [float("-inf")]},
        {"k": {1, 2}},
        {"k": frozenset()},
        {"k": b"bytes"},
        {"k": object()},
        {"k": 1j},
        {"k": decimal.Decimal("1.5")},
        {"k": "\ud800"},
        {"\udc00": 1},
        {"k": nested_list(10_000)},
        {"k": nested_dict(10_000)},
        {"k": generator()},
    ],
)
def test_bad_payload_is_invalid(payload: object) -> None:
    """Payloads must be JSON objects with string keys that canonical JSON can carry."""
    rejects(batch(entry(modified_arguments=payload)), INVALID)
    rejects(batch(entry(elicitation=payload)), INVALID)


def test_cyclic_payload_is_invalid() -> None:
    """A payload that contains itself is refused as a cycle."""
    payload: dict[str, Any] = {"a": []}
    payload["a"].append(payload)
    error = rejects(batch(entry(modified_arguments=payload)), INVALID)
    assert "cycle" in error.message


def test_payload_depth_limit() -> None:
    """Payloads nest at most 64 containers deep."""
    result = validate_resume_input(batch(entry(elicitation=nested_dict(64))))
    assert result.decisions is not None
    assert result.decisions[0].elicitation == nested_dict(64)
    rejects(batch(entry(elicitation=nested_dict(65))), INVALID)
    rejects(batch(entry(elicitation={"k": nested_list(64)})), INVALID)


def test_both_payloads_on_one_entry_is_invalid() -> None:
    """An entry gives at most one of modified_arguments and elicitation."""
    rejects(batch(entry(modified_arguments={}, elicitation={})), INVALID)


def test_payload_byte_limit() -> None:
    """A payload of exactly 16384 canonical bytes passes; one byte more is over the limit."""
    overhead = len('{"k":""}')
    at_limit = {"k": "x" * (MAX_DECISION_PAYLOAD_BYTES - overhead)}
    result = validate_resume_input(batch(entry(modified_arguments=at_limit)))
    assert result.decisions is not None
    assert result.decisions[0].modified_arguments == at_limit
    over = {"k": "x" * (MAX_DECISION_PAYLOAD_BYTES - overhead + 1)}
    error = rejects(batch(entry(modified_arguments=over)), LIMIT)
    assert "decisions[0].modified_arguments is over 16384 bytes" in error.message
    wide = {f"k{index}": index for index in range(MAX_DECISION_PAYLOAD_BYTES)}
    rejects(batch(entry(elicitation=wide)), LIMIT)
    multibyte = {"k": "é" * (MAX_DECISION_PAYLOAD_BYTES // 2)}
    rejects(batch(entry(elicitation=multibyte)), LIMIT)
    rejects(batch(entry(elicitation={"k": "x" * 50_000_000})), LIMIT)
    rejects(batch(entry(elicitation={"k": [0] * 10_000_000})), LIMIT)


def test_shared_subtrees_cannot_explode_the_payload() -> None:
    """A payload that reuses one list 2**60 times is refused quickly as over the limit."""
    value: Any = [1]
    for _ in range(60):
        value = [value, value]
    rejects(batch(entry(elicitation={"k": value})), LIMIT)


def test_duplicate_approval_ids_are_refused() -> None:
    """The same approval id twice in a batch is a duplicate, whatever the other fields."""
    rejects(batch(entry(approval_id="a"), entry(approval_id="a", outcome="reject_once")), DUPLICATE)

    class Text(str):
        """A str subclass spelling the same id."""

        __slots__ = ()

    rejects(
        batch(entry(approval_id="b"), RunDecision(approval_id=Text("b"), outcome="allow_once")),
        DUPLICATE,
    )


def test_keys_repeated_through_str_subclasses_are_invalid() -> None:
    """A key given twice (once through a str subclass with another hash) is refused."""

    class Other(str):
        """Hashes differently from the plain string."""

        __slots__ = ()

        def __hash__(self) -> int:
            return 1

        def __eq__(self, other: object) -> bool:
            return other is self

    rejects({"expected_version": 1, "decision": "approve", Other("decision"): "deny"}, INVALID)
    rejects(batch(entry(elicitation={"k": 1, Other("k"): 2})), INVALID)


# --- hostile input ---------------------------------------------------------------------------


def problem(check: Callable[[object], object], value: object) -> str | None:
    """What is wrong with how ``check`` handled ``value``, or ``None`` when it behaved."""
    try:
        result = check(value)
    except AgentDecisionError as error:
        if type(error) is not AgentDecisionError:
            return f"raised {type(error).__name__}"
        if error.code not in {INVALID, LIMIT, DUPLICATE}:
            return f"raised code {error.code}"
        if SECRET in str(error):
            return "echoed the secret"
        return None
    except Exception as error:
        return f"raised {type(error).__name__}"
    if not isinstance(result, (ResumeInput, AgentRunRef)):
        return f"returned {type(result).__name__}"
    return None


def test_hostile_inputs_raise_only_decision_errors() -> None:
    """Every weird value in every position either validates or raises ``AgentDecisionError``."""
    assert len(hostile_values()) >= 40
    problems = [
        f"{where}/{label}: {found}"
        for where, check in contexts()
        for label, value in hostile_values()
        if (found := problem(check, value)) is not None
    ]
    assert problems == []


def test_foreign_decision_errors_are_contained() -> None:
    """An ``AgentDecisionError`` raised by a hostile mapping does not leak its message or code."""
    error = rejects(SecretRaisingMapping(), INVALID)
    assert SECRET not in str(error)


def test_hostile_dict_subclass_keys_still_validate() -> None:
    """A dict subclass whose methods raise is read through the dict itself."""
    value = ItemsRaisesDict(expected_version=1, decisions=[entry(elicitation=ItemsRaisesDict(k=1))])
    result = validate_resume_input(value)
    assert result.decisions == (
        RunDecision(approval_id="a1", outcome="allow_once", elicitation={"k": 1}),
    )


def test_list_subclass_overrides_are_not_trusted() -> None:
    """A list subclass whose iteration raises is read through the list itself."""
    result = validate_resume_input(batch(entry(modified_arguments={"k": HostileList([1, 2])})))
    assert result.decisions is not None
    assert result.decisions[0].modified_arguments == {"k": [1, 2]}
    result = validate_resume_input({"expected_version": 1, "decisions": HostileList([entry()])})
    assert result.decisions == (RunDecision(approval_id="a1", outcome="allow_once"),)


def descend(frames: int, bottom: Callable[[], str]) -> str:
    """Call ``bottom`` with ``frames`` more frames on the stack."""
    if frames:
        return descend(frames - 1, bottom)
    return bottom()


def test_deep_call_stack_still_raises_decision_errors() -> None:
    """Validation with little stack left validates or raises ``AgentDecisionError``, no other."""
    value = batch(entry(elicitation=nested_dict(60)))

    def validate() -> str:
        try:
            validate_resume_input(value)
        except AgentDecisionError as error:
            return error.code
        except RecursionError:
            return "RecursionError"
        return "ok"

    # C calls count against the limit too, so the room left is measured, not computed.
    room = sys.getrecursionlimit()
    while True:
        try:
            descend(room, lambda: "ok")
            break
        except RecursionError:
            room -= 1
    outcomes: set[str] = set()
    # A few frames of slack: with none at all, even calling the validator overflows.
    for margin in range(4, 400):
        outcomes.add(descend(room - margin, validate))
    assert outcomes == {INVALID, "ok"}


# --- secrets never echo ----------------------------------------------------------------------


SECRET_CASES: list[tuple[str, object, str]] = [
    ("decision-value", {"expected_version": 1, "decision": SECRET}, INVALID),
    ("unknown-top-key", {"expected_version": 1, "decision": "approve", SECRET: 1}, INVALID),
    ("version-str", {"expected_version": SECRET, "decision": "approve"}, INVALID),
    ("decisions-str", {"expected_version": 1, "decisions": SECRET}, INVALID),
    ("entry-str", batch(SECRET), INVALID),
    ("unknown-entry-key", batch({**entry(approval_id=SECRET), SECRET: 1}), INVALID),
    ("bad-outcome", batch(entry(approval_id=SECRET, outcome=SECRET)), INVALID),
    ("reason-type", batch(entry(approval_id=SECRET, reason=[SECRET])), INVALID),
    ("reason-surrogate", batch(entry(approval_id=SECRET, reason="SECRET-REASON\ud800")), INVALID),
    ("id-surrogate", batch(entry(approval_id=SECRET + "\ud800")), INVALID),
    ("payload-type", batch(entry(approval_id=SECRET, elicitation=[SECRET])), INVALID),
    (
        "payload-nan",
        batch(entry(approval_id=SECRET, elicitation={"SECRET-KEY": float("nan")})),
        INVALID,
    ),
    ("payload-key", batch(entry(approval_id=SECRET, elicitation={1: "SECRET-PAYLOAD"})), INVALID),
    (
        "payload-surrogate",
        batch(entry(approval_id=SECRET, elicitation={"SECRET-KEY": "SECRET-PAYLOAD\ud800"})),
        INVALID,
    ),
    ("payload-set", batch(entry(approval_id=SECRET, elicitation={"k": {SECRET}})), INVALID),
    (
        "both-payloads",
        batch(entry(approval_id=SECRET, elicitation={"k": 1}, modified_arguments={"k": 2})),
        INVALID,
    ),
    ("id-too-long", batch(entry(approval_id=SECRET * 20)), LIMIT),
    ("reason-too-long", batch(entry(approval_id=SECRET, reason="SECRET-REASON" * 200)), LIMIT),
    (
        "payload-too-big",
        batch(
            entry(approval_id=SECRET, modified_arguments={"SECRET-KEY": "SECRET-PAYLOAD" * 2000})
        ),
        LIMIT,
    ),
    ("batch-too-big", batch(*[entry(approval_id=f"{SECRET}-{n}") for n in range(200)]), LIMIT),
    ("duplicate", batch(entry(approval_id=SECRET), entry(approval_id=SECRET)), DUPLICATE),
    ("hostile-mapping", SecretRaisingMapping(), INVALID),
    ("getitem-key-error", GetitemRaisesMapping(), INVALID),
]


@pytest.mark.parametrize(
    ("value", "code"), [case[1:] for case in SECRET_CASES], ids=[case[0] for case in SECRET_CASES]
)
def test_messages_never_echo_ids_or_content(value: object, code: str) -> None:
    """No error message or repr contains an approval id, reason, payload key or payload value."""
    error = rejects(value, code)
    for secret in SECRETS:
        assert secret not in str(error)
        assert secret not in repr(error)


def test_secret_cases_cover_every_code() -> None:
    """The secret-echo cases exercise all three codes."""
    assert {case[2] for case in SECRET_CASES} == {INVALID, LIMIT, DUPLICATE}


# --- run references --------------------------------------------------------------------------


def test_run_ref_from_mapping_and_instance() -> None:
    """A two-key mapping or an ``AgentRunRef`` becomes a plain ``AgentRunRef``."""
    assert coerce_run_ref({"run_id": "r", "session_id": "s"}) == AgentRunRef("r", "s")
    assert coerce_run_ref(AgentRunRef("r", "s")) == AgentRunRef("r", "s")
    longest = "x" * 256
    assert coerce_run_ref({"run_id": longest, "session_id": longest}) == AgentRunRef(
        longest, longest
    )


def test_run_ref_by_run_id_alone() -> None:
    """Without a session id (absent or ``None``) a ref names the run by its id alone."""
    assert coerce_run_ref({"run_id": "r"}) == AgentRunRef("r", None)
    assert coerce_run_ref({"run_id": "r", "session_id": None}) == AgentRunRef("r")
    assert coerce_run_ref(AgentRunRef("r")) == AgentRunRef("r", None)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "r",
        ("r", "s"),
        {"session_id": "s"},
        {"run_id": "r", "session_id": "s", "extra": 1},
        {"run_id": "", "session_id": "s"},
        {"run_id": "r", "session_id": 1},
        {"run_id": "x" * 257, "session_id": "s"},
        {"run_id": "r", "session_id": "\ud800"},
        {"runId": "r", "sessionId": "s"},
        AgentRunRef("", "s"),
        AgentRunRef("r", 5),  # type: ignore[arg-type]
        AgentRunRef("r", "x" * 257),
        HostileMapping(),
        ItemsRaisesDict(run_id="r", session_id=7),
    ],
)
def test_bad_run_refs_are_invalid(value: object) -> None:
    """Anything but a non-empty, bounded run id (and session id when given) is invalid."""
    with pytest.raises(AgentDecisionError) as caught:
        coerce_run_ref(value)
    assert type(caught.value) is AgentDecisionError
    assert caught.value.code == INVALID
