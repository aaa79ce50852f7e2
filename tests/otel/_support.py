"""Tracing test support: an SDK tracer provider with an in-memory exporter, and span lookups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A fresh tracer provider exporting every ended span to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in end order."""
    return [s for s in spans if s.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    """The only span called ``name``."""
    (span,) = named(spans, name)
    return span


def events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    """The attributes of each event called ``name`` on ``span``."""
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


def everything_recorded(spans: Sequence[ReadableSpan]) -> str:
    """Every name, attribute and event value the spans carry, as one string to search."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        if span.status.description:
            parts.append(span.status.description)
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
    return "\n".join(parts)
