"""A short scripted investigation with the mock provider and two tools, streamed readably."""

from __future__ import annotations

import time
from typing import Any

import anyio

from .agents import create_agent
from .content import tool_call_content
from .events import AgentEvent
from .providers import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
)
from .tools import ToolDefinition, ToolExecutionContext

__all__ = ("run_demo",)

_LOGS = {
    "checkout": [
        "12:01:07 checkout-api ERROR timeout calling payments (2.0s)",
        "12:01:09 checkout-api ERROR timeout calling payments (2.0s)",
    ],
}
_FILES = {"config/payments.yaml": "timeout_ms: 2000\nretries: 0\n"}


def _search_logs(args: dict[str, Any], context: ToolExecutionContext) -> Any:
    lines = _LOGS.get(str(args.get("service", "")), [])
    context.report_progress({"scanned": 48_213, "matched": len(lines)})
    return {"matches": lines}


def _read_file(args: dict[str, Any], context: ToolExecutionContext) -> Any:
    path = str(args.get("path", ""))
    if path not in _FILES:
        raise FileNotFoundError(path)
    return {"path": path, "content": _FILES[path]}


def _script() -> list[list[Any]]:
    return [
        [
            provider_thinking_delta("Checkout is failing; look at its logs first."),
            provider_tool_call(tool_call_content("call_1", "search_logs", {"service": "checkout"})),
            provider_done({"input_tokens": 120, "output_tokens": 18}),
        ],
        [
            provider_thinking_delta("Timeouts at exactly 2.0s: check the payments client config."),
            provider_tool_call(
                tool_call_content("call_2", "read_file", {"path": "config/payments.yaml"})
            ),
            provider_done({"input_tokens": 210, "output_tokens": 22}),
        ],
        [
            provider_text_delta("Root cause: the payments client times out at 2000 ms with "),
            provider_text_delta("no retries. Raise the timeout or add one retry with backoff."),
            provider_done({"input_tokens": 290, "output_tokens": 31}),
        ],
    ]


class _Printer:
    def __init__(self, color: bool) -> None:
        self.color = color
        self.started = time.perf_counter()
        self.in_text = False

    def _paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def line(self, label: str, detail: str = "", code: str = "36") -> None:
        if self.in_text:
            print()
            self.in_text = False
        stamp = f"{(time.perf_counter() - self.started) * 1000:7.1f} ms"
        print(f"{self._paint(stamp, '2')}  {self._paint(f'{label:<24}', code)} {detail}".rstrip())

    def event(self, event: AgentEvent) -> None:
        kind = event.type
        if kind == "message_delta":
            delta = event.delta  # type: ignore[union-attr]
            if delta.kind == "text" and delta.text:
                if not self.in_text:
                    self.line("assistant", "", "32")
                    print("           ", end="")
                    self.in_text = True
                print(delta.text, end="", flush=True)
            elif delta.kind == "thinking" and delta.text:
                self.line("thinking", self._paint(delta.text, "3;2"), "35")
            return
        if kind in ("message_started", "message_finished"):
            return
        if kind == "turn_started":
            self.line(f"turn {event.turn}", "", "1")  # type: ignore[union-attr]
        elif kind == "tool_execution_started":
            self.line("tool call", f"{event.name}({event.arguments})", "33")  # type: ignore[union-attr]
        elif kind == "tool_execution_progress":
            self.line("  progress", str(event.progress), "2")  # type: ignore[union-attr]
        elif kind == "tool_execution_finished":
            result = event.result  # type: ignore[union-attr]
            detail = f"error: {result.error.message}" if result.error else str(result.value)
            self.line("  result", detail[:110], "33")
        elif kind == "turn_finished":
            usage = event.usage  # type: ignore[union-attr]
            tokens = f"{usage.total_tokens} tokens" if usage is not None else ""
            self.line("turn finished", tokens, "2")
        elif kind == "agent_finished":
            self.line("agent finished", f"status={event.status}", "1;32")  # type: ignore[union-attr]
        elif kind == "error":
            self.line("error", event.error.message, "1;31")  # type: ignore[union-attr]
        else:
            self.line(kind)


async def _main(color: bool) -> int:
    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(turns=_script()),
        instructions="You investigate production incidents using the tools you are given.",
        tools=[
            ToolDefinition(
                "search_logs",
                _search_logs,
                description="Search a service's error logs.",
                parameters={
                    "type": "object",
                    "properties": {"service": {"type": "string"}},
                    "required": ["service"],
                },
            ),
            ToolDefinition(
                "read_file",
                _read_file,
                description="Read a configuration file.",
                parameters={
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            ),
        ],
    )
    session = agent.create_session(id="incident-4711")
    printer = _Printer(color)
    printer.line("investigation", "why is checkout failing?", "1")
    stream = session.stream("Why is checkout failing since 12:00?")
    async for event in stream:
        printer.event(event)
    result = stream.result
    assert result is not None
    entries = await session.entries()
    usage = result.usage.total_tokens if result.usage is not None else 0
    print(f"\n{len(entries)} session entries, {usage} tokens, status {result.status}.")
    return 0 if result.status == "succeeded" else 1


def run_demo(*, color: bool = False) -> int:
    """Run the demo investigation and print its event stream; returns an exit code."""
    return anyio.run(_main, color)
