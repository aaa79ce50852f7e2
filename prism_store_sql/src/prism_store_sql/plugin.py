"""The Prism plugin: opens SQL stores for ``sqlite:`` and ``postgresql:`` URLs."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode

from prism_core.hookspecs import hookimpl
from prism_core.stores import StorePair

from ._engine import STORE_SCHEMES, sql_scheme
from ._errors import SqlStoreConfigError
from ._open import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores
from ._schema import DEFAULT_TABLE_PREFIX
from ._store_types import SqlCheckpointStore, SqlSessionStore

__all__ = ("SqlStorePlugin", "plugin", "split_table_prefix")


def split_table_prefix(url: str) -> tuple[str, str]:
    """Split a store URL into the database URL and its ``?table_prefix=`` option.

    ``table_prefix`` is a store option, not a driver one, so it is removed before SQLAlchemy
    parses the URL; without it the prefix is the default (``prism_``). Raises
    :class:`SqlStoreConfigError` when it is given more than once or empty.
    """
    # Split by hand: urllib would turn sqlite:///x.db into sqlite:/x.db.
    base, _, text = url.partition("?")
    query = parse_qsl(text, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "table_prefix"]
    if not prefixes:
        return url, DEFAULT_TABLE_PREFIX
    if len(prefixes) > 1 or not prefixes[0]:
        raise SqlStoreConfigError("give ?table_prefix= once, with a non-empty value")
    rest = urlencode([(n, v) for n, v in query if n != "table_prefix"], quote_via=quote)
    return (f"{base}?{rest}" if rest else base), prefixes[0]


class SqlStorePlugin:
    """Answers the store hooks for ``sqlite:`` / ``postgresql:`` URLs (``+driver`` allowed,
    ``?table_prefix=`` optional).

    Pass :data:`plugin` to ``create_agent(..., plugins=[prism_store_sql.plugin])`` or
    ``open_checkpoint_store(url, plugins=[...])``.
    """

    store_schemes: tuple[str, ...] = STORE_SCHEMES

    @hookimpl
    def prism_checkpoint_store(self, url: str, create: bool) -> SqlCheckpointStore | None:
        """A SQL checkpoint store for ``url``, or ``None`` for other schemes; ``create`` is
        its ``create_schema``."""
        if not sql_scheme(url):
            return None
        database, prefix = split_table_prefix(url)
        return create_sql_checkpoint_store(database, table_prefix=prefix, create_schema=create)

    @hookimpl
    def prism_open_stores(self, url: str) -> StorePair | None:
        """Both SQL stores for ``url`` on one connection (or engine), committing a durable
        turn together; ``None`` for other schemes. They create their tables on first use
        until told ``create_nothing()`` (``open_stores(url, create=False)``)."""
        if not sql_scheme(url):
            return None
        database, prefix = split_table_prefix(url)
        checkpoints, sessions = open_sql_stores(database, table_prefix=prefix)
        return StorePair(checkpoints, sessions)

    @hookimpl
    def prism_session_store(self, url: str, create: bool) -> SqlSessionStore | None:
        """A SQL session store for ``url``, or ``None`` for other schemes; ``create`` is its
        ``create_schema``."""
        if not sql_scheme(url):
            return None
        database, prefix = split_table_prefix(url)
        return create_sql_session_store(database, table_prefix=prefix, create_schema=create)


#: The plugin object this distribution registers under the ``prism`` entry-point group.
plugin = SqlStorePlugin()
