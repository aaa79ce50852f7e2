"""The plugin object of ``prism-runtime-server``.

The server answers no hooks: it is an application over the host's stores
(:func:`prism_server.create_app`), started with ``prism serve``. The entry point makes the
installed distribution visible to ``prism plugins``.
"""

from __future__ import annotations

__all__: tuple[str, ...] = ()
