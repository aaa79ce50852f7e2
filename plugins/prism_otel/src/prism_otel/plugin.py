"""The plugin object of ``prism-runtime-otel``: it answers ``prism_middleware``.

``create_agent(..., plugins=[prism_otel.plugin])`` traces through the global tracer provider
(``opentelemetry.trace.set_tracer_provider``); contents are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. For an explicit provider, pass
``middleware=[create_otel_middleware(tracer_provider=...)]`` instead.
"""

from __future__ import annotations

from prism_core.hookspecs import hookimpl

from ._middleware import OtelMiddleware, create_otel_middleware

__all__ = ("prism_middleware",)


@hookimpl
def prism_middleware() -> list[OtelMiddleware]:
    """One tracing middleware per agent, on the global tracer provider."""
    return [create_otel_middleware()]
