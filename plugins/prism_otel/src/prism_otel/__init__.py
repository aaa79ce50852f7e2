"""OpenTelemetry tracing for Prism runs, following the GenAI semantic conventions.

Each run is an ``invoke_agent {agent}`` span, each provider turn a ``chat {model}`` span and
each tool call an ``execute_tool {tool}`` span under it; suspension, resume, guardrail
decisions and checkpoint writes are span events. Compose it with
``create_agent(..., plugins=[prism_otel.plugin])`` (global tracer provider) or
``create_agent(..., middleware=[create_otel_middleware(tracer_provider=...)])``.
"""

from __future__ import annotations

from . import plugin
from ._middleware import OtelMiddleware, create_otel_middleware

__all__ = ("OtelMiddleware", "create_otel_middleware", "plugin")
