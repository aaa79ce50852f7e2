"""The plugin object of ``prism-runtime-agui``.

The endpoint answers no hooks: it is an application over the host's agent and stores
(:func:`prism_agui.create_agui_app`), so the distribution registers no entry point (plugin
discovery never imports it); a host may still pass this module in ``plugins=[...]``.
"""

from __future__ import annotations

__all__: tuple[str, ...] = ()
