"""The ``CheckpointStore`` protocol: versioned, fenced, owner-scoped JSON records.

Rules every implementation follows (the conformance suite in ``prism_core.testing`` checks
them):

- ``ownership`` is matched exactly; ``None`` and ``{}`` both mean "unowned". A record whose
  owner differs from the caller's reads as absent (``load`` → ``None``, ``delete`` →
  ``False``, not listed) and a ``save`` over it raises the same generic
  :class:`~prism_core.CheckpointConflictError` as any other conflict.
- Every write goes through ``save_request(request)``, one checked :class:`SaveRequest`; the
  keyword ``save(namespace, key, value, ...)`` is the callers' form of the same write.
- ``save(..., version=v)`` names the new version (a positive integer). It conflicts when a
  record exists and ``v`` is not above its version; when ``expected_version`` is given and
  differs from the stored version (``0`` means "must not exist"); when the stored record has a
  fencing token and the caller passes none or a lower one.
- ``metadata`` is a ``dict[str, str]`` sidecar stored beside the value, replaced on every
  save. ``value`` must be JSON; stores keep it as canonical JSON.
- ``list`` pages by ``(namespace, key)`` order with an opaque ``cursor``.
- A stored record that cannot be read back (its value is not JSON, a number field is not an
  integer) raises :class:`CheckpointStoreError` with code ``ERR_PRISM_CHECKPOINT_CORRUPT``
  (build it with :func:`corrupt_record`); sidecar metadata that is not a JSON map of strings
  reads as absent (``None``), never as a failure.

It must not know what a record holds: run state lives in ``_state``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs

from .._echo import echo
from ..codec import dumps, loads
from ..errors import AgentRunStateError, CheckpointConflictError, PrismError
from ._ledger_rows import LedgerWrite

T = TypeVar("T")

__all__ = (
    "CORRUPT_CHECKPOINT_CODE",
    "MAX_CHECKPOINT_PAGE_SIZE",
    "MAX_STORED_INT",
    "UnreadableRecord",
    "decode_listed",
    "CheckpointLimitError",
    "CheckpointPage",
    "CheckpointRecord",
    "CheckpointStore",
    "CheckpointStoreError",
    "CheckpointStoreUnavailableError",
    "InvalidCheckpointError",
    "MAX_INDEXED_STATUS_CHARS",
    "SaveRequest",
    "check_name",
    "conflict",
    "corrupt_record",
    "decode_cursor",
    "decode_stored_metadata",
    "decode_stored_value",
    "check_value_bytes",
    "encode_cursor",
    "indexed_status",
    "list_arguments",
    "normalise_ownership",
    "reading_run_record",
    "stored_int",
    "validate_list",
    "validate_save",
)

MAX_CHECKPOINT_PAGE_SIZE = 1000

#: The ``code`` of the :class:`CheckpointStoreError` a store raises for a record it cannot read.
CORRUPT_CHECKPOINT_CODE = "ERR_PRISM_CHECKPOINT_CORRUPT"


class CheckpointStoreError(PrismError):
    """The backing store failed (connection lost, server error); nothing was half-written.

    With ``code == "ERR_PRISM_CHECKPOINT_CORRUPT"``: a stored record cannot be read back.
    """

    code = "ERR_PRISM_CHECKPOINT_STORE"


class CheckpointStoreUnavailableError(CheckpointStoreError):
    """The store could not be reached or did not answer in time (connection dropped or
    refused, a statement or command timeout, a failover in progress).

    This is the *transient* marker of the store contract: the durable layer retries an
    operation that raised it, with bounded, jittered backoff, and otherwise stops the run
    without marking it ``failed``. A write that raised it may or may not have been applied.
    """

    code = "ERR_PRISM_STORE_UNAVAILABLE"


class CheckpointLimitError(PrismError):
    """A save would exceed the store's ``max_records`` or ``max_value_bytes``."""

    code = "ERR_PRISM_CHECKPOINT_LIMIT"


class InvalidCheckpointError(PrismError, ValueError):
    """A store call had malformed arguments (bad version, non-JSON value, bad ownership…)."""

    code = "ERR_PRISM_CHECKPOINT_INVALID"


@attrs.frozen(kw_only=True)
class CheckpointRecord:
    """One stored checkpoint. ``value`` is JSON data; ``metadata`` is the sidecar map."""

    namespace: str
    key: str
    version: int
    value: Any
    metadata: Mapping[str, str] | None = None
    ownership: Mapping[str, str] | None = None
    fencing_token: int | None = None
    category: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@attrs.frozen
class CheckpointPage:
    """One page of :meth:`CheckpointStore.list`; ``cursor`` is ``None`` on the last page.

    ``unreadable`` names the records of the page's range that the store holds but cannot read
    back (a corrupt row, say): they are left out of ``records`` instead of failing the whole
    listing, and reported here, so one bad record never hides the others."""

    records: tuple[CheckpointRecord, ...]
    cursor: str | None = None
    unreadable: tuple[UnreadableRecord, ...] = ()


@attrs.frozen
class UnreadableRecord:
    """A stored record a listing left out because it cannot be read back: where it is and
    why (the corrupt-record message, which names the field, never the stored value)."""

    namespace: str
    key: str
    reason: str


def decode_listed(
    items: Iterable[T],
    decode: Callable[[T], CheckpointRecord],
    name: Callable[[T], tuple[str, str]],
) -> tuple[tuple[CheckpointRecord, ...], tuple[UnreadableRecord, ...]]:
    """Decode a listing's stored items: the records, and the items that raise the
    corrupt-record error (:func:`corrupt_record`) as :class:`UnreadableRecord`, named by
    ``name(item)``; any other error propagates."""
    records: list[CheckpointRecord] = []
    unreadable: list[UnreadableRecord] = []
    for item in items:
        try:
            records.append(decode(item))
        except CheckpointStoreError as exc:
            if exc.code != CORRUPT_CHECKPOINT_CODE:
                raise
            namespace, key = name(item)
            unreadable.append(UnreadableRecord(namespace=namespace, key=key, reason=str(exc)))
    return tuple(records), tuple(unreadable)


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable storage for run checkpoints (see the module docstring for the rules)."""

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        ...

    async def save(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        expected_version: int | None = None,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
        metadata: Mapping[str, str] | None = None,
        category: str | None = None,
    ) -> CheckpointRecord:
        """Write the record atomically or raise ``CheckpointConflictError``.

        This is the callers' form: the arguments checked into one :class:`SaveRequest`
        (:func:`validate_save`, plus the store's own limits), then :meth:`save_request`. A
        store built on :class:`~prism_core.stores.CheckpointStoreBase` gets it from the base.
        """
        ...

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record ``request`` describes atomically, or raise
        ``CheckpointConflictError`` (the rules of :meth:`save`): the one write path, which
        the kernel calls for every save. ``request`` was checked by :func:`validate_save`;
        the store checks only its own limits (:func:`check_value_bytes`), before any I/O,
        and writes ``request.ledger`` in the same commit when it keeps an effect ledger."""
        ...

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        ...

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records visible to ``ownership`` (in ``namespace`` when given), in key order."""
        ...

    async def aclose(self) -> None:
        """Release what the store opened; idempotent."""
        ...


def normalise_ownership(ownership: Mapping[str, str] | None) -> dict[str, str] | None:
    """``None`` for unowned (``None`` or ``{}``), else a plain ``dict[str, str]``.

    Raises :class:`InvalidCheckpointError` for anything that is not a string-to-string map of
    valid UTF-8 text (a lone surrogate cannot be stored).
    """
    if ownership is None:
        return None
    if not isinstance(ownership, Mapping):
        raise InvalidCheckpointError("ownership must be a mapping of strings to strings")
    try:
        items = list(ownership.items())
    except Exception as exc:  # the caller's mapping failed to iterate
        raise InvalidCheckpointError("ownership could not be read as a mapping") from exc
    out: dict[str, str] = {}
    for k, v in items:
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidCheckpointError("ownership must be a mapping of strings to strings")
        k, v = str.__str__(k), str.__str__(v)
        if not _is_utf8(k) or not _is_utf8(v):
            raise InvalidCheckpointError("ownership must be valid UTF-8 text")
        out[k] = v
    return out or None


def _is_utf8(text: str) -> bool:
    # ASCII is the common case and needs no encoding pass.
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def conflict(namespace: str, key: str) -> CheckpointConflictError:
    """The one generic conflict error (it never says whether a foreign owner exists)."""
    return CheckpointConflictError(f"Checkpoint conflict on {namespace}/{key}")


def corrupt_record(namespace: str, key: str, problem: str) -> CheckpointStoreError:
    """The error for a stored record that cannot be read back (``problem`` says why)."""
    return CheckpointStoreError(
        f"checkpoint {echo(namespace)}/{echo(key)} is corrupt: {problem}",
        code=CORRUPT_CHECKPOINT_CODE,
    )


@contextmanager
def reading_run_record(run_id: str) -> Iterator[None]:
    """Turn a corrupt-record :class:`CheckpointStoreError` raised inside the block into an
    :class:`~prism_core.AgentRunStateError` naming the run ``run_id``."""
    try:
        yield
    except CheckpointStoreError as exc:
        if exc.code != CORRUPT_CHECKPOINT_CODE:
            raise
        raise AgentRunStateError(f"agent run {echo(run_id)} cannot be read: {exc.message}") from exc


def decode_stored_value(text: Any, namespace: str, key: str) -> Any:
    """The JSON value of a stored record, or the :func:`corrupt_record` error when the stored
    text is missing, truncated, empty or not JSON."""
    if not isinstance(text, str | bytes):
        raise corrupt_record(namespace, key, "its value is missing")
    try:
        return loads(text)
    except (ValueError, RecursionError) as exc:
        raise corrupt_record(namespace, key, "its value is not JSON") from exc


def decode_stored_metadata(text: Any) -> dict[str, str] | None:
    """A stored sidecar map, or ``None`` when it is absent or not a JSON map of strings."""
    if not isinstance(text, str | bytes):
        return None
    try:
        data = loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        return None
    return data


def stored_int(value: Any, namespace: str, key: str, what: str) -> int:
    """A stored integer field (an ``int``, or the decimal text Redis keeps), else the
    :func:`corrupt_record` error naming ``what``."""
    if isinstance(value, bytes | str):
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        if text.isascii() and text.lstrip("-").isdigit() and len(text) <= 20:
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    raise corrupt_record(namespace, key, f"its {what} is not an integer")


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a non-empty string, else :class:`InvalidCheckpointError` naming
    ``what`` (``"namespace"``, ``"key"``)."""
    if not isinstance(value, str) or not value:
        raise InvalidCheckpointError(f"{what} must be a non-empty string")
    if not _is_utf8(value):
        raise InvalidCheckpointError(f"{what} must be valid UTF-8 text")
    return value


#: The largest version or fencing token a record may carry: what every store keeps and reads
#: back exactly (a signed 64-bit integer column; Redis keeps decimal text, read back up to
#: this size). A save above it is refused, never stored unreadable.
MAX_STORED_INT = 2**63 - 1


def _check_int(value: Any, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidCheckpointError(f"{what} must be an integer >= {minimum}, got {echo(value)}")
    if value > MAX_STORED_INT:
        raise InvalidCheckpointError(
            f"{what} must be at most {MAX_STORED_INT} (2**63 - 1), got {echo(value)}"
        )
    return value


#: Longest status a store indexes; a longer one is not indexed (no run status comes close).
MAX_INDEXED_STATUS_CHARS = 64


def indexed_status(value: Any) -> str | None:
    """The status a store indexes ``value`` under (its top-level ``"status"`` when ``value`` is
    a JSON object and that member is a non-empty string), or ``None`` when it has none."""
    if not isinstance(value, Mapping):
        return None
    status = value.get("status")
    if not isinstance(status, str) or not status or len(status) > MAX_INDEXED_STATUS_CHARS:
        return None
    return status


@attrs.frozen(kw_only=True)
class SaveRequest:
    """One checked ``save``: what a store's ``save_request`` writes.

    Build it with :func:`validate_save`, which checks every argument the same way in every
    store. ``value_json`` is the value's canonical JSON text (``value_bytes`` its length in
    UTF-8 bytes), ``ownership`` and ``metadata`` are plain ``dict[str, str]`` (``None`` for
    unowned and for no metadata), and ``status`` is the value's :func:`indexed_status`.
    """

    namespace: str
    key: str
    value_json: str
    version: int
    expected_version: int | None
    ownership: dict[str, str] | None
    fencing_token: int | None
    metadata: dict[str, str] | None
    category: str | None
    status: str | None = None
    #: The ledger rows this save writes with the record (a store that keeps an effect ledger
    #: writes them in the same commit, only when the record is written; others ignore them).
    ledger: LedgerWrite | None = None
    value_bytes: int = attrs.field(
        default=attrs.Factory(lambda self: len(self.value_json.encode("utf-8")), takes_self=True)
    )


def check_value_bytes(request: SaveRequest, max_value_bytes: int | None) -> None:
    """Raise :class:`CheckpointLimitError` when ``request``'s canonical value is over
    ``max_value_bytes`` (a store's own limit; ``None`` means none)."""
    if max_value_bytes is not None and request.value_bytes > max_value_bytes:
        raise CheckpointLimitError(
            f"checkpoint value is {request.value_bytes} bytes; this store allows {max_value_bytes}"
        )


def validate_save(
    namespace: Any,
    key: Any,
    value: Any,
    *,
    version: Any,
    expected_version: Any = None,
    ownership: Any = None,
    fencing_token: Any = None,
    metadata: Any = None,
    category: Any = None,
    max_value_bytes: int | None = None,
    encoded: bytes | None = None,
    ledger: LedgerWrite | None = None,
) -> SaveRequest:
    """The :class:`SaveRequest` of ``save`` arguments, checked the same way in every store,
    before any I/O.

    ``encoded``, when given, is ``value``'s canonical JSON as the caller already made it
    (``prism_core.codec.dumps(value)``, e.g. to check a size bound): it is used as is instead
    of encoding the value again. ``ledger``: the ledger rows the save carries (the durable
    writer's; ``None`` or an empty one for none). Raises :class:`InvalidCheckpointError` for
    malformed arguments and :class:`CheckpointLimitError` when the canonical value exceeds
    ``max_value_bytes``.
    """
    check_name(namespace, "namespace")
    check_name(key, "key")
    _check_int(version, "version", minimum=1)
    if expected_version is not None:
        _check_int(expected_version, "expected_version", minimum=0)
    if fencing_token is not None:
        _check_int(fencing_token, "fencing_token", minimum=0)
    if category is not None and (not isinstance(category, str) or not _is_utf8(category)):
        raise InvalidCheckpointError("category must be a string of valid UTF-8 text")
    meta: dict[str, str] | None = None
    if metadata is not None:
        try:
            meta = normalise_ownership(metadata) or {}
        except InvalidCheckpointError:
            raise InvalidCheckpointError(
                "metadata must be a mapping of strings to strings (valid UTF-8 text)"
            ) from None
    if encoded is None:
        try:
            encoded = dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidCheckpointError(f"checkpoint value is not JSON: {exc}") from exc
    elif not isinstance(encoded, bytes):
        raise InvalidCheckpointError("encoded must be the canonical JSON bytes of the value")
    request = SaveRequest(
        namespace=namespace,
        key=key,
        value_json=encoded.decode("utf-8"),
        version=version,
        expected_version=expected_version,
        ownership=normalise_ownership(ownership),
        fencing_token=fencing_token,
        metadata=meta,
        category=category,
        # A mapping's status is read as is; anything else (an attrs value) in its JSON form.
        status=indexed_status(value if isinstance(value, Mapping) else json.loads(encoded)),
        ledger=ledger if ledger else None,
        value_bytes=len(encoded),
    )
    check_value_bytes(request, max_value_bytes)
    return request


def encode_cursor(namespace: str, key: str) -> str:
    """An opaque paging cursor for the position after ``(namespace, key)``."""
    raw = json.dumps([namespace, key], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The ``(namespace, key)`` of a cursor from :func:`encode_cursor`; anything else is an
    :class:`InvalidCheckpointError`."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8"))
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise InvalidCheckpointError("cursor is not one this store returned") from exc
    if not isinstance(data, list) or len(data) != 2 or not all(isinstance(p, str) for p in data):
        raise InvalidCheckpointError("cursor is not one this store returned")
    return data[0], data[1]


def list_arguments(
    namespace: Any, ownership: Any, limit: Any, cursor: Any
) -> tuple[dict[str, str] | None, tuple[str, str] | None]:
    """Validate ``list`` arguments the same way in every store, before any I/O: returns the
    normalised owner and the ``(namespace, key)`` position the cursor points after."""
    if namespace is not None:
        check_name(namespace, "namespace")
    validate_list(limit, cursor)
    owner = normalise_ownership(ownership)
    return owner, decode_cursor(cursor) if cursor is not None else None


def validate_list(limit: Any, cursor: Any) -> None:
    """Validate ``list`` paging arguments (``limit`` 1..1000, ``cursor`` a string or None)."""
    _check_int(limit, "limit", minimum=1)
    if limit > MAX_CHECKPOINT_PAGE_SIZE:
        raise InvalidCheckpointError(f"limit must be at most {MAX_CHECKPOINT_PAGE_SIZE}")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidCheckpointError("cursor must be a string from a previous page")
