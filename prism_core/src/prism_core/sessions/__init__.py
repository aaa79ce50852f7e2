"""Sessions: ``AgentSession``, the object a host runs an agent on.

The session records it appends (entries, the ``SessionStore`` protocol, the memory store,
branch reads) live in :mod:`prism_core.records`, below the run loop, and are exported from
there (and, for store authors, from :mod:`prism_core.stores`). This package must not
re-export them; it only re-exports its own names and must not hold behaviour.
"""

from ._session import AgentSession, SessionClosedError

__all__ = ("AgentSession", "SessionClosedError")
