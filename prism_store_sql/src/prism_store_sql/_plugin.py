"""The Prism plugin: opens SQL stores for ``sqlite:`` and ``postgresql:`` URLs."""

from __future__ import annotations

from prism_core.hookspecs import hookimpl

from ._checkpoints import SqlCheckpointStore, create_sql_checkpoint_store
from ._engine import STORE_SCHEMES, sql_scheme
from ._sessions import SqlSessionStore, create_sql_session_store

__all__ = ("SqlStorePlugin", "plugin")


class SqlStorePlugin:
    """Answers the store hooks for ``sqlite:`` / ``postgresql:`` URLs (``+driver`` allowed).

    Pass :data:`plugin` to ``create_agent(..., plugins=[prism_store_sql.plugin])`` or
    ``open_checkpoint_store(url, plugins=[...])``.
    """

    store_schemes: tuple[str, ...] = STORE_SCHEMES

    @hookimpl
    def prism_checkpoint_store(self, url: str) -> SqlCheckpointStore | None:
        """A SQL checkpoint store for ``url``, or ``None`` for other schemes."""
        return create_sql_checkpoint_store(url) if sql_scheme(url) else None

    @hookimpl
    def prism_session_store(self, url: str) -> SqlSessionStore | None:
        """A SQL session store for ``url``, or ``None`` for other schemes."""
        return create_sql_session_store(url) if sql_scheme(url) else None


#: The plugin object this distribution registers under the ``prism`` entry-point group.
plugin = SqlStorePlugin()
