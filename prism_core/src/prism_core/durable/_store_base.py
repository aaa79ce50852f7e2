"""``CheckpointStoreBase``: a checkpoint store writes one :class:`SaveRequest`, callers keep
the keyword ``save``.

A checkpoint store has one write path: ``save_request(request)`` (part of the
:class:`~prism_core.stores.CheckpointStore` protocol), which every store implements and the
kernel always calls (:func:`save_checkpoint`). The callers' form ``save(namespace, key, value,
*, version, ...)`` comes from :class:`CheckpointStoreBase`: it checks the keyword arguments
into one :class:`SaveRequest` (:func:`validate_save`) and hands it to ``save_request``. The
durable writer, which has encoded the run state already (for its size bound), builds the
request with those bytes, so the value is encoded once. A wrapper that counts, fails or
forwards saves does so in ``save_request``: that is the method every save goes through.

It must not decide what is written or when: the writer does.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from ._checkpoints import (
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    SaveRequest,
    validate_save,
)

__all__ = ("CheckpointStoreBase", "save_checkpoint")


class CheckpointStoreBase(abc.ABC):
    """The base of a checkpoint store: implement ``save_request``, ``load``, ``delete``,
    ``list`` and ``aclose``; ``save`` (the callers' keyword form, which checks its arguments
    and calls ``save_request``) and ``async with`` come from here.

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


async def save_checkpoint(store: CheckpointStore, request: SaveRequest) -> CheckpointRecord:
    """Save ``request`` on ``store``: the kernel's one save path (``store.save_request``)."""
    return await store.save_request(request)
