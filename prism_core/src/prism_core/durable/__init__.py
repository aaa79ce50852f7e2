"""Durable runs: the checkpoint store contract, run state, suspension and resume."""

from ._checkpoints import (
    MAX_CHECKPOINT_PAGE_SIZE,
    CheckpointLimitError,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    CheckpointStoreError,
    InvalidCheckpointError,
    SaveRequest,
    conflict,
    normalise_ownership,
    validate_list,
    validate_save,
)
from ._memory import MemoryCheckpointStore, create_memory_checkpoint_store

__all__ = (
    "MAX_CHECKPOINT_PAGE_SIZE",
    "CheckpointLimitError",
    "CheckpointPage",
    "CheckpointRecord",
    "CheckpointStore",
    "CheckpointStoreError",
    "InvalidCheckpointError",
    "MemoryCheckpointStore",
    "SaveRequest",
    "conflict",
    "create_memory_checkpoint_store",
    "normalise_ownership",
    "validate_list",
    "validate_save",
)
