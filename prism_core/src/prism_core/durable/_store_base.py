"""``CheckpointStoreBase``: a checkpoint store writes one :class:`SaveRequest`, callers keep
the keyword ``save``.

The :class:`~prism_core.CheckpointStore` protocol is the callers' form: ``save(namespace, key,
value, *, version, expected_version=None, ownership=None, fencing_token=None, metadata=None,
category=None)``. A store built on :class:`CheckpointStoreBase` implements
``save_request(request)`` instead: the base's ``save`` checks the keyword arguments into one
:class:`SaveRequest` (:func:`validate_save`) and hands it over, and the durable writer, which
has encoded the run state already (for its size bound), builds the request with those bytes
and calls ``save_request`` itself, so the value is encoded once.

:func:`save_checkpoint` is how the kernel saves a request: through ``save_request`` when the
store's class has it, else through the keyword ``save`` (a store that implements the protocol
directly, or a wrapper that forwards to another store). A subclass that overrides ``save``
(to count or fail saves, say) is saved through its ``save`` too, so it sees every save.

It must not decide what is written or when: the writer does.
"""

from __future__ import annotations

import abc
import logging
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from .._capability import capability
from ._checkpoints import CheckpointPage, CheckpointRecord, SaveRequest, validate_save
from ._effects import EffectLedger

__all__ = (
    "CheckpointStoreBase",
    "ledger_not_carried",
    "save_checkpoint",
    "save_keywords",
    "takes_requests",
)

logger = logging.getLogger("prism_core.durable")

#: The classes already warned about (once each) by :func:`ledger_not_carried`.
_WARNED: weakref.WeakSet[type] = weakref.WeakSet()


def ledger_not_carried(target: object, request: SaveRequest) -> None:
    """Warn, once per class, that ``target``, a store that keeps an effect ledger, is saved
    through its keyword ``save``, which cannot carry ``request``'s ledger rows: the ledger
    misses them. A wrapper that forwards ``save_request`` carries them."""
    cls = type(target)
    if request.ledger and cls not in _WARNED and capability(target, EffectLedger) is not None:
        _WARNED.add(cls)
        logger.warning(
            "%s is saved through save(), which carries no effect ledger rows: the ledger "
            "misses the effects of these saves (implement or forward save_request)",
            cls.__qualname__,
        )


def save_keywords(request: SaveRequest) -> dict[str, Any]:
    """The keyword arguments of the ``save`` that ``request`` describes (the value aside)."""
    return {
        "version": request.version,
        "expected_version": request.expected_version,
        "ownership": request.ownership,
        "fencing_token": request.fencing_token,
        "metadata": request.metadata,
        "category": request.category,
    }


class CheckpointStoreBase(abc.ABC):
    """The base of a checkpoint store: implement ``save_request``, ``load``, ``delete``,
    ``list`` and ``aclose``; ``save`` and ``async with`` come from here.

    ``max_value_bytes`` (``None``: no limit) is the store's own bound on a value's canonical
    JSON; ``save`` checks it, and so must ``save_request`` (with
    :func:`~prism_core.stores.check_value_bytes`), since the kernel calls it directly.
    """

    max_value_bytes: int | None = None

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
        """Write the record atomically or raise ``CheckpointConflictError``: the arguments
        checked into one :class:`SaveRequest` (raising
        :class:`~prism_core.InvalidCheckpointError` or
        :class:`~prism_core.CheckpointLimitError` before any I/O), then
        :meth:`save_request`."""
        request = validate_save(
            namespace,
            key,
            value,
            version=version,
            expected_version=expected_version,
            ownership=ownership,
            fencing_token=fencing_token,
            metadata=metadata,
            category=category,
            max_value_bytes=self.max_value_bytes,
        )
        return await self.save_request(request)

    @abc.abstractmethod
    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record ``request`` describes atomically, or raise
        ``CheckpointConflictError`` (the rules of ``CheckpointStore.save``). ``request`` was
        checked by ``validate_save``; the store checks only its own limits, before any I/O."""

    @abc.abstractmethod
    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""

    @abc.abstractmethod
    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""

    @abc.abstractmethod
    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records visible to ``ownership`` (in ``namespace`` when given), in key order."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release what the store opened; idempotent."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _defined_by(cls: type, name: str) -> type | None:
    return next((owner for owner in cls.__mro__ if name in vars(owner)), None)


#: The answer of :func:`takes_requests` per class (weakly held: classes made in a function die).
_TAKES_REQUESTS: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def takes_requests(cls: type) -> bool:
    """Whether the kernel saves through ``save_request`` on instances of ``cls``: the class
    has it, and no class below the one that defines it overrides ``save`` (a subclass that
    overrides ``save`` intercepts saves, so they keep going through it). Looked up on the
    class, so a proxy that forwards attributes is saved through its own ``save``."""
    known = _TAKES_REQUESTS.get(cls)
    if known is None:
        request_owner = _defined_by(cls, "save_request")
        save_owner = _defined_by(cls, "save")
        known = (
            request_owner is not None
            and callable(vars(request_owner)["save_request"])
            and (save_owner is None or issubclass(request_owner, save_owner))
        )
        _TAKES_REQUESTS[cls] = known
    return known


async def save_checkpoint(store: Any, request: SaveRequest, value: Any) -> CheckpointRecord:
    """Save ``request`` on ``store``: ``store.save_request(request)`` when the store takes
    requests (:func:`takes_requests`), else ``store.save(namespace, key, value, ...)`` with
    ``value`` (the value the request encodes)."""
    if takes_requests(type(store)):
        record: CheckpointRecord = await store.save_request(request)
        return record
    ledger_not_carried(store, request)
    saved: CheckpointRecord = await store.save(
        request.namespace, request.key, value, **save_keywords(request)
    )
    return saved
