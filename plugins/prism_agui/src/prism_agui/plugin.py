"""The plugin object of ``prism-runtime-agui``.

The endpoint answers no hooks: it is an application over the host's agent and stores
(:func:`prism_agui.create_agui_app`). The entry point makes the installed distribution
visible to ``prism plugins``.
"""

from __future__ import annotations

__all__: tuple[str, ...] = ()
