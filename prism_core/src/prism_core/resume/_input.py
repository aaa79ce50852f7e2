"""Resume input: the shape checks a decision passes before any durable state is touched.

Every public resume entrypoint runs :func:`validate_resume_input` and :func:`coerce_run_ref`
before it reads a checkpoint, resolves an agent or runs a tool, so malformed input fails
closed with :class:`~prism_core.errors.AgentDecisionError` and no side effect. Only the shape
is checked here; whether an approval id is pending, in scope or fresh is decided later against
the stored run state.

Both functions accept any Python value — including objects whose dunder methods raise, cyclic
or very deep containers and ``attrs`` instances built with bad field values — and raise nothing
but :class:`~prism_core.errors.AgentDecisionError`. Messages name the field and index at fault
but never its content: approval ids, reasons and payloads may be secrets or attacker-controlled.

It must not read a checkpoint, a store or the agent: it checks shape only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, NoReturn, TypeVar, cast

import attrs

from .._principal import InvalidPrincipalError, check_channel
from ..codec import dumps, loads
from ..errors import AgentDecisionError
from ._resolutions import Resolution, ResolutionInputError, parse_resolutions

__all__ = (
    "MAX_ACTOR_BYTES",
    "MAX_APPROVAL_ID_CHARS",
    "MAX_DECISION_BATCH",
    "MAX_DECISION_PAYLOAD_BYTES",
    "MAX_DECISION_REASON_BYTES",
    "MAX_EXPECTED_VERSION",
    "AgentRunRef",
    "DecisionOutcome",
    "LegacyDecision",
    "ResumeInput",
    "RunDecision",
    "coerce_run_ref",
    "validate_resume_input",
)

DecisionOutcome = Literal["allow_once", "allow_for_run", "reject_once", "reject_for_run"]
"""How one decision entry resolves its pending call."""

LegacyDecision = Literal["approve", "deny", "continue"]
"""The single-decision form: approve or deny every pending call, or continue after a crash."""

#: Most entries one ``decisions`` batch may carry.
MAX_DECISION_BATCH = 128
#: Longest ``approval_id``, in characters.
MAX_APPROVAL_ID_CHARS = 128
#: Largest ``reason``, in UTF-8 bytes.
MAX_DECISION_REASON_BYTES = 2048
#: Largest ``actor`` (who decided), in UTF-8 bytes.
MAX_ACTOR_BYTES = 256
#: Largest ``modified_arguments`` or ``elicitation`` payload, in bytes of canonical JSON.
MAX_DECISION_PAYLOAD_BYTES = 16384
#: Largest ``expected_version``: the biggest integer every JSON peer represents exactly.
MAX_EXPECTED_VERSION = 2**53 - 1

_T = TypeVar("_T")

_INVALID = "ERR_PRISM_DECISION_INVALID"
_LIMIT = "ERR_PRISM_DECISION_LIMIT"
_DUPLICATE = "ERR_PRISM_DECISION_DUPLICATE"

_MAX_RUN_REF_CHARS = 256
# Tool arguments and elicitation answers are shallow; a cap far below the interpreter's
# recursion limit keeps canonical JSON encoding and decoding safe.
_MAX_PAYLOAD_DEPTH = 64

_RESUME_KEYS: tuple[str, ...] = ("expected_version", "decision", "decisions", "resolutions")
_RESUME_KEYS += ("actor", "channel", "reason")
_ENTRY_KEYS = ("approval_id", "outcome", "reason", "modified_arguments", "elicitation")
_REF_KEYS = ("run_id", "session_id")
_LEGACY_DECISIONS = ("approve", "deny", "continue")
_OUTCOMES = ("allow_once", "allow_for_run", "reject_once", "reject_for_run")

_KINDS: tuple[tuple[type, str], ...] = (
    (type(None), "None"),
    (bool, "a bool"),
    (int, "an int"),
    (float, "a float"),
    (complex, "a complex number"),
    (str, "a string"),
    (bytes, "bytes"),
    (bytearray, "a bytearray"),
    (memoryview, "a memoryview"),
    (list, "a list"),
    (tuple, "a tuple"),
    (dict, "a dict"),
    (set, "a set"),
    (frozenset, "a frozenset"),
)


@attrs.frozen(kw_only=True)
class RunDecision:
    """One entry of a decision batch: how to resolve the pending call ``approval_id``.

    ``reason`` travels with ``reject_*`` outcomes; ``modified_arguments`` replaces the call's
    arguments and ``elicitation`` answers an elicitation instead of running the call (at most
    one of the two).
    """

    approval_id: str
    outcome: DecisionOutcome
    reason: str | None = None
    modified_arguments: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ResumeInput:
    """A validated resume request: exactly one of ``decision`` and ``decisions`` is set.

    ``expected_version`` is the run state version the caller saw; resume fails closed when the
    stored version has moved on. ``resolutions`` (with ``decision == "continue"`` only) settle
    tool calls left in doubt by a crash. ``actor`` (who decides, at most 256 UTF-8 bytes),
    ``channel`` (the door it came through; ``None`` records ``"host"``) and ``reason`` (why,
    for the whole resume; a batch entry's own reason wins for its entry) are kept in the run's
    decision audit, redacted like every reason.
    """

    expected_version: int
    decision: LegacyDecision | None = None
    decisions: tuple[RunDecision, ...] | None = None
    resolutions: tuple[Resolution, ...] | None = None
    actor: str | None = None
    channel: str | None = None
    reason: str | None = None


@attrs.frozen
class AgentRunRef:
    """Names one durable run: its ``run_id`` and the ``session_id`` it belongs to.

    ``session_id=None`` names the run by ``run_id`` alone; the session id is then read from
    the run's record (ownership still scopes the load). A given session id must match it.
    """

    run_id: str
    session_id: str | None = None


class _InputError(AgentDecisionError):
    """Raised inside this module only, so foreign ``AgentDecisionError`` raises stay contained."""


_UNREADABLE_INPUT = "resume input could not be read: inspecting it raised an exception"
_UNREADABLE_REF = "run reference could not be read: inspecting it raised an exception"

# The public errors are built without ``__init__``: after a RecursionError there may be no
# stack left for a Python frame, and the public functions must still raise their one type.
_NEW_ERROR = AgentDecisionError.__new__


def validate_resume_input(value: object) -> ResumeInput:
    """Check a resume request of any Python type and return it as a detached ``ResumeInput``.

    Accepts a mapping with ``expected_version`` and one of ``decision`` or ``decisions`` (a
    ``None`` value counts as absent), or a ``ResumeInput``, whose fields are checked again.
    Batch entries may be mappings or ``RunDecision`` values. Raises
    :class:`~prism_core.errors.AgentDecisionError` — ``ERR_PRISM_DECISION_INVALID``,
    ``ERR_PRISM_DECISION_LIMIT`` or ``ERR_PRISM_DECISION_DUPLICATE`` — and nothing else.
    """
    try:
        return _resume_input(value)
    except (_InputError, ResolutionInputError) as error:
        failure = _NEW_ERROR(AgentDecisionError, *error.args)
        failure.code = error.code
    except Exception:
        # Hostile dunder methods or recursion at a deep call site: the contract is one type.
        failure = _NEW_ERROR(AgentDecisionError, _UNREADABLE_INPUT)
        failure.code = _INVALID
    raise failure


def coerce_run_ref(value: object) -> AgentRunRef:
    """Return ``value``, an ``AgentRunRef`` or a ``run_id``/``session_id`` map, as a run ref.

    ``run_id`` must be, and ``session_id`` when given (not ``None``) must also be, a
    non-empty string of at most 256 characters. Anything else raises
    :class:`~prism_core.errors.AgentDecisionError` (``ERR_PRISM_DECISION_INVALID``).
    """
    try:
        return _run_ref(value)
    except _InputError as error:
        failure = _NEW_ERROR(AgentDecisionError, *error.args)
        failure.code = error.code
    except Exception:
        failure = _NEW_ERROR(AgentDecisionError, _UNREADABLE_REF)
        failure.code = _INVALID
    raise failure


def _fail(message: str, code: str = _INVALID) -> NoReturn:
    raise _InputError(message, code=code)


@contextmanager
def _reading(where: str) -> Iterator[None]:
    """Turn any exception raised by foreign code in the block into an invalid-input error."""
    try:
        yield
    except _InputError:
        raise
    except Exception:
        raise _InputError(
            f"{where} could not be read: inspecting it raised an exception", code=_INVALID
        ) from None


def _describe(value: object) -> str:
    kind = type(value)
    for cls, text in _KINDS:
        if kind is cls:
            return text
    return "an object of another type"


def _exact_str(value: object) -> str | None:
    """``value`` as a plain ``str`` (subclass overrides cannot run later), or ``None``."""
    if issubclass(type(value), str):
        return str.__str__(cast(str, value))
    return None


def _is_mapping(value: object) -> bool:
    return issubclass(type(value), (dict, Mapping))


def _mapping_items(value: object, where: str, most: int) -> list[tuple[object, object]]:
    """Up to ``most`` key/value pairs of a mapping, read without trusting its overrides."""
    with _reading(where):
        if issubclass(type(value), dict):
            return list(itertools.islice(dict.items(cast("dict[object, object]", value)), most))
        mapping = cast("Mapping[object, object]", value)
        return [(key, mapping[key]) for key in itertools.islice(iter(mapping), most)]


def _fields(value: object, where: str, allowed: tuple[str, ...]) -> dict[str, object]:
    """The keys of a mapping whose keys must all be in ``allowed``; ``None`` values dropped."""
    fields: dict[str, object] = {}
    seen: set[str] = set()
    # One more than allowed is enough to prove an unknown key without reading a huge mapping.
    for key, item in _mapping_items(value, where, len(allowed) + 1):
        name = _exact_str(key)
        if name is None or name not in allowed:
            _fail(
                f"{where} has an unknown key{_hint(name, allowed)}; "
                f"the allowed keys are {', '.join(allowed)}"
            )
        if name in seen:
            _fail(f"{where} gives the key {name} more than once")
        seen.add(name)
        if item is not None:
            fields[name] = item
    return fields


def _hint(name: str | None, allowed: tuple[str, ...]) -> str:
    """Suggest the allowed key a misspelt one stands for (``expectedVersion``), never echo it."""
    if name is None or len(name) > 64:
        return ""
    folded = name.replace("_", "").replace("-", "").lower()
    for key in allowed:
        if key.replace("_", "") == folded:
            return f" (did you mean {key}?)"
    return ""


def _attributes(value: object, where: str, names: tuple[str, ...]) -> dict[str, object]:
    """The non-``None`` fields of an attrs instance, which attrs never validated."""
    with _reading(where):
        read = {name: getattr(value, name) for name in names}
    return {name: item for name, item in read.items() if item is not None}


def _resume_input(value: object) -> ResumeInput:
    where = "resume input"
    if issubclass(type(value), ResumeInput):
        fields = _attributes(value, where, _RESUME_KEYS)
    elif _is_mapping(value):
        fields = _fields(value, where, _RESUME_KEYS)
    else:
        _fail(
            f"{where} must be a mapping with expected_version and decision or decisions, "
            f"not {_describe(value)}"
        )
    expected_version = _expected_version(fields.get("expected_version"))
    has_decision = "decision" in fields
    has_decisions = "decisions" in fields
    if has_decision == has_decisions:
        which = "both" if has_decision else "neither"
        _fail(f"{where} gives {which} of decision and decisions; give exactly one")
    resolutions = None
    if "resolutions" in fields:
        if fields.get("decision") != "continue":
            _fail(f'{where} gives resolutions; they travel with decision "continue" only')
        resolutions = parse_resolutions(fields["resolutions"])
    actor = _reason(fields.get("actor"), "actor", limit=MAX_ACTOR_BYTES)
    channel = _channel(fields.get("channel"))
    reason = _reason(fields.get("reason"), "reason")
    if has_decision:
        return ResumeInput(
            expected_version=expected_version,
            decision=_legacy_decision(fields["decision"]),
            resolutions=resolutions,
            actor=actor,
            channel=channel,
            reason=reason,
        )
    return ResumeInput(
        expected_version=expected_version,
        decisions=_batch(fields["decisions"]),
        actor=actor,
        channel=channel,
        reason=reason,
    )


def _channel(value: object) -> str | None:
    if value is None:
        return None
    text = _exact_str(value)
    try:
        return check_channel(text)
    except InvalidPrincipalError:
        _fail(
            "channel must be 1-32 characters of a-z, 0-9, '_', '.' and '-', starting with a letter"
        )


def _expected_version(value: object) -> int:
    if value is None:
        _fail("resume input needs expected_version, the run state version being decided")
    kind = type(value)
    if kind is bool or not issubclass(kind, int):
        _fail(f"expected_version must be an int, not {_describe(value)}")
    version = int.__int__(cast(int, value))
    if version < 1:
        _fail("expected_version must be at least 1")
    if version > MAX_EXPECTED_VERSION:
        _fail(f"expected_version must be at most {MAX_EXPECTED_VERSION}")
    return version


def _legacy_decision(value: object) -> LegacyDecision:
    text = _exact_str(value)
    if text is None or text not in _LEGACY_DECISIONS:
        _fail("decision must be one of approve, deny or continue")
    return cast(LegacyDecision, text)


def _batch(value: object) -> tuple[RunDecision, ...]:
    kind = type(value)
    entries: Iterable[object]
    if issubclass(kind, list):
        size = list.__len__(cast("list[object]", value))
        entries = list.__iter__(cast("list[object]", value))
    elif issubclass(kind, tuple):
        size = tuple.__len__(cast("tuple[object, ...]", value))
        entries = tuple.__iter__(cast("tuple[object, ...]", value))
    else:
        _fail(f"decisions must be a list of decision entries, not {_describe(value)}")
    if size == 0:
        _fail("decisions is empty; give at least one entry")
    if size > MAX_DECISION_BATCH:
        _fail(f"decisions has {size} entries; the limit is {MAX_DECISION_BATCH}", _LIMIT)
    # Snapshot first: foreign code run while checking an entry must not reshape the batch.
    snapshot = list(itertools.islice(entries, MAX_DECISION_BATCH))
    first_index: dict[str, int] = {}
    decisions: list[RunDecision] = []
    for index, entry in enumerate(snapshot):
        decision = _entry(entry, f"decisions[{index}]")
        earlier = first_index.setdefault(decision.approval_id, index)
        if earlier != index:
            _fail(
                f"decisions[{index}].approval_id repeats decisions[{earlier}].approval_id; "
                "a batch decides each approval once",
                _DUPLICATE,
            )
        decisions.append(decision)
    return tuple(decisions)


def _entry(value: object, where: str) -> RunDecision:
    if issubclass(type(value), RunDecision):
        fields = _attributes(value, where, _ENTRY_KEYS)
    elif _is_mapping(value):
        fields = _fields(value, where, _ENTRY_KEYS)
    else:
        _fail(f"{where} must be a mapping or RunDecision, not {_describe(value)}")
    approval_id = _approval_id(fields.get("approval_id"), f"{where}.approval_id")
    outcome = _exact_str(fields.get("outcome"))
    if outcome is None or outcome not in _OUTCOMES:
        _fail(f"{where}.outcome is missing or not one of {', '.join(_OUTCOMES)}")
    reason = _reason(fields.get("reason"), f"{where}.reason")
    if "modified_arguments" in fields and "elicitation" in fields:
        _fail(f"{where} gives both modified_arguments and elicitation; give at most one")
    modified = fields.get("modified_arguments")
    elicitation = fields.get("elicitation")
    return RunDecision(
        approval_id=approval_id,
        outcome=cast(DecisionOutcome, outcome),
        reason=reason,
        modified_arguments=(
            None if modified is None else _payload(modified, f"{where}.modified_arguments")
        ),
        elicitation=(
            None if elicitation is None else _payload(elicitation, f"{where}.elicitation")
        ),
    )


def _approval_id(value: object, where: str) -> str:
    if value is None:
        _fail(f"{where} is missing")
    if not issubclass(type(value), str):
        _fail(f"{where} must be a string, not {_describe(value)}")
    length = str.__len__(cast(str, value))
    if length == 0:
        _fail(f"{where} is empty")
    if length > MAX_APPROVAL_ID_CHARS:
        _fail(
            f"{where} is {length} characters; the limit is {MAX_APPROVAL_ID_CHARS}",
            _LIMIT,
        )
    return _unicode(str.__str__(cast(str, value)), where)


def _unicode(text: str, where: str) -> str:
    """``text`` if it encodes as UTF-8 (no lone surrogates), which every store needs."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        _fail(f"{where} is not valid Unicode text (it holds a lone surrogate)")
    return text


def _reason(value: object, where: str, *, limit: int = MAX_DECISION_REASON_BYTES) -> str | None:
    if value is None:
        return None
    if not issubclass(type(value), str):
        _fail(f"{where} must be a string, not {_describe(value)}")
    length = str.__len__(cast(str, value))
    # Every character is at least one byte, so a very long string is over the cap unencoded.
    if length > 4 * limit:
        _fail(f"{where} is at least {length} bytes; the limit is {limit}", _LIMIT)
    text = _unicode(str.__str__(cast(str, value)), where)
    size = len(text.encode("utf-8"))
    if size > limit:
        _fail(f"{where} is {size} bytes; the limit is {limit}", _LIMIT)
    return text


def _payload(value: object, where: str) -> dict[str, Any]:
    """A detached copy of a JSON-object payload, parsed back from its canonical JSON."""
    if not _is_mapping(value):
        _fail(f"{where} must be a mapping with string keys, not {_describe(value)}")
    plain = _PayloadCopy(where).copy(value, 1)
    limit = MAX_DECISION_PAYLOAD_BYTES
    try:
        blob = dumps(plain)
    except UnicodeEncodeError:
        _fail(f"{where} holds text that is not valid Unicode (a lone surrogate)")
    except (ValueError, TypeError, RecursionError):
        _fail(f"{where} is not JSON-serialisable")
    if len(blob) > limit:
        _fail(f"{where} is {len(blob)} bytes of canonical JSON; the limit is {limit}", _LIMIT)
    return cast("dict[str, Any]", loads(blob))


class _PayloadCopy:
    """Copies a payload into plain JSON types, refusing what canonical JSON cannot carry.

    ``remaining`` counts down a lower bound of the canonical size, so oversized, exploding
    (shared sub-containers) or endless inputs stop early with a limit error.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.remaining = MAX_DECISION_PAYLOAD_BYTES
        self.open_ids: set[int] = set()

    def charge(self, size: int) -> None:
        self.remaining -= size
        if self.remaining < 0:
            _fail(
                f"{self.where} is over {MAX_DECISION_PAYLOAD_BYTES} bytes of canonical JSON; "
                f"the limit is {MAX_DECISION_PAYLOAD_BYTES}",
                _LIMIT,
            )

    def copy(self, value: object, depth: int) -> object:
        kind = type(value)
        if value is None or kind is bool:
            self.charge(4)
            return value
        if issubclass(kind, int):
            number = int.__int__(cast(int, value))
            # A b-bit integer has more than b / 4 decimal digits.
            self.charge(max(1, number.bit_length() // 4))
            return number
        if issubclass(kind, float):
            real = float.__float__(cast(float, value))
            if not math.isfinite(real):
                _fail(f"{self.where} holds NaN or an infinite number, which JSON cannot carry")
            self.charge(1)
            return real
        if issubclass(kind, str):
            self.charge(str.__len__(cast(str, value)) + 2)
            return str.__str__(cast(str, value))
        if issubclass(kind, (dict, Mapping)):
            return self.copy_mapping(value, depth)
        if issubclass(kind, (list, tuple)):
            return self.copy_sequence(value, depth)
        _fail(f"{self.where} holds {_describe(value)}, which JSON cannot carry")

    def enter(self, value: object, depth: int) -> None:
        if depth > _MAX_PAYLOAD_DEPTH:
            _fail(f"{self.where} nests deeper than {_MAX_PAYLOAD_DEPTH} levels")
        if id(value) in self.open_ids:
            _fail(f"{self.where} contains itself (a cycle), which JSON cannot carry")
        self.open_ids.add(id(value))

    def copy_mapping(self, value: object, depth: int) -> dict[str, object]:
        self.enter(value, depth)
        # Each entry is at least `"":0` and a comma: refuse a huge dict before reading it.
        if (
            issubclass(type(value), dict)
            and 4 * dict.__len__(cast("dict[object, object]", value)) > self.remaining
        ):
            self.charge(self.remaining + 1)
        # The braces less the comma the last entry does not have (each key charges one).
        self.charge(1)
        copied: dict[str, object] = {}
        for key, item in _mapping_items(value, self.where, self.remaining // 4 + 1):
            name = _exact_str(key)
            if name is None:
                _fail(f"{self.where} has a key that is not a string ({_describe(key)})")
            if name in copied:
                _fail(f"{self.where} has two keys with the same text")
            self.charge(len(name) + 4)
            copied[name] = self.copy(item, depth + 1)
        self.open_ids.discard(id(value))
        return copied

    def copy_sequence(self, value: object, depth: int) -> list[object]:
        self.enter(value, depth)
        items: Iterator[object]
        if issubclass(type(value), list):
            size = list.__len__(cast("list[object]", value))
            items = list.__iter__(cast("list[object]", value))
        else:
            size = tuple.__len__(cast("tuple[object, ...]", value))
            items = tuple.__iter__(cast("tuple[object, ...]", value))
        # Each element is at least one character plus a comma.
        self.charge(2 + max(0, size - 1))
        if size > self.remaining:
            self.charge(self.remaining + 1)
        copied = [self.copy(item, depth + 1) for item in list(itertools.islice(items, size))]
        self.open_ids.discard(id(value))
        return copied


def _run_ref(value: object) -> AgentRunRef:
    where = "run reference"
    if issubclass(type(value), AgentRunRef):
        fields = _attributes(value, where, _REF_KEYS)
    elif _is_mapping(value):
        fields = _fields(value, where, _REF_KEYS)
    else:
        _fail(f"{where} must be an AgentRunRef or a mapping with run_id (and session_id)")
    run_id = _ref_id(fields.get("run_id"), "run_id")
    session_id = fields.get("session_id")
    return AgentRunRef(run_id, None if session_id is None else _ref_id(session_id, "session_id"))


def _ref_id(value: object, name: str) -> str:
    if value is None:
        _fail(f"run reference needs {name}")
    if not issubclass(type(value), str):
        _fail(f"run reference {name} must be a string, not {_describe(value)}")
    length = str.__len__(cast(str, value))
    if length == 0:
        _fail(f"run reference {name} is empty")
    if length > _MAX_RUN_REF_CHARS:
        _fail(f"run reference {name} is {length} characters; the limit is {_MAX_RUN_REF_CHARS}")
    return _unicode(str.__str__(cast(str, value)), f"run reference {name}")
