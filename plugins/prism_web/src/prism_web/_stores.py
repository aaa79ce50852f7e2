"""The stores a face serves: one :class:`~prism_core.StorePair`, or the two stores by keyword.

Every factory takes ``stores`` (the pair :func:`~prism_core.open_stores` opens, so a turn
commits its session entries and checkpoint together); the ``checkpoints=`` and ``sessions=``
keywords of earlier releases are still taken, both or neither. The face does not close the
stores: whoever opened them does.
"""

from __future__ import annotations

from typing import Any

from prism_core import StorePair

__all__ = ("store_pair",)


def store_pair(stores: Any, *, checkpoints: Any = None, sessions: Any = None) -> StorePair:
    """The pair a factory was given: ``stores``, or ``StorePair(checkpoints, sessions)``.

    ``TypeError`` for both forms at once, for neither, or for one store alone.
    """
    if stores is not None:
        if checkpoints is not None or sessions is not None:
            raise TypeError("give stores= or checkpoints= and sessions=, not both")
        if isinstance(stores, StorePair):
            return stores
        if isinstance(stores, tuple) and len(stores) == 2:
            return StorePair(*stores)
        raise TypeError("stores must be a StorePair (prism_core.open_stores)")
    if checkpoints is None or sessions is None:
        raise TypeError("give stores= (a StorePair), or both checkpoints= and sessions=")
    return StorePair(checkpoints, sessions)
