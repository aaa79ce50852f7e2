"""``prism chat``: a small terminal chat with a real model, two tools and one approval.

The model comes from an installed provider plugin (``prism_provider`` hook). Answers stream as
they arrive; tool calls and their results are shown. Every turn is a durable run on in-memory
stores, so the ``calculate`` tool suspends the run for a y/n answer in the terminal and the
run resumes with that decision, the same way a host approves a call from another process.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import anyio
import anyio.to_thread

from prism_core import (
    Agent,
    Guardrail,
    ModelConfig,
    PrismError,
    RunStateOptions,
    ToolCallContent,
    ToolDefinition,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_plugin_manager,
    discover_plugins,
    resume_agent_run_stream,
)

__all__ = (
    "DEFAULT_SYSTEM",
    "ChatCommand",
    "ChatSetupError",
    "chat_tools",
    "command",
    "find_provider",
    "run_chat",
)

DEFAULT_SYSTEM = (
    "You are a helpful assistant in a terminal chat. Be brief. Use the tools when they help: "
    "current_time for the date or time, calculate for arithmetic."
)

_REVISION = "prism-chat.1"
#: Provider ids whose plugins ship as extras of the ``prism-runtime`` distribution.
_EXTRAS = {"openai": "openai", "anthropic": "anthropic"}
_GATED = "calculate"
_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


class ChatSetupError(PrismError):
    """The chat cannot start (no provider for the model); the message says what to install."""

    code = "ERR_PRISM_PROVIDER_MISSING"


def _current_time(args: dict[str, Any], context: Any) -> dict[str, str]:
    now = datetime.now(UTC)
    return {"utc": now.isoformat(timespec="seconds"), "local": now.astimezone().isoformat()}


def _calculate(args: dict[str, Any], context: Any) -> dict[str, float]:
    a, b, op = float(args["a"]), float(args["b"]), args["op"]
    if op == "/" and b == 0:
        raise ValueError("division by zero")
    value = _OPERATORS[op](a, b)
    return {"result": int(value) if value.is_integer() else value}


def chat_tools() -> tuple[ToolDefinition, ...]:
    """The chat's tools: ``current_time`` (read-only) and ``calculate`` (asks first)."""
    return (
        ToolDefinition(
            "current_time",
            _current_time,
            description="The current date and time, in UTC and in the user's local zone.",
            parameters={"type": "object", "properties": {}},
            effect="read",
        ),
        ToolDefinition(
            _GATED,
            _calculate,
            description="Apply + - * or / to two numbers.",
            parameters={
                "type": "object",
                "properties": {
                    "a": {"type": "number"},
                    "b": {"type": "number"},
                    "op": {"type": "string", "enum": ["+", "-", "*", "/"]},
                },
                "required": ["a", "b", "op"],
            },
            effect="compute",
        ),
    )


def _ask_before_calculate(context: Any) -> dict[str, str]:
    if context.tool_name == _GATED:
        return {"action": "interrupt", "reason": "calculate asks the user first"}
    return {"action": "allow"}


def find_provider(model: ModelConfig, plugins: Sequence[object] | None = None) -> Any:
    """The provider the installed plugins give for ``model``; :class:`ChatSetupError` if none."""
    found = discover_plugins() if plugins is None else list(plugins)
    provider = create_plugin_manager(*found).hook.prism_provider(model=model)
    if provider is not None:
        return provider
    extra = _EXTRAS.get(model.provider)
    hint = (
        f"install it with: pip install 'prism-runtime[{extra}]'"
        if extra
        else f"install a Prism plugin whose prism_provider hook answers {model.provider!r}"
    )
    raise ChatSetupError(f"no installed plugin provides {model.provider!r} models; {hint}")


def _env_name(provider: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_BASE_URL"


class _Terminal:
    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout
        self.open_line = False
        self.mode = ""

    def write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def end_line(self) -> None:
        if self.open_line:
            self.write("\n")
            self.open_line = False
        self.mode = ""

    def stream(self, mode: str, prefix: str, text: str) -> None:
        """Continue the open line of ``mode``, or start a new one with ``prefix``."""
        if self.mode != mode:
            self.end_line()
            self.write(prefix)
            self.open_line, self.mode = True, mode
        self.write(text)

    async def ask(self, prompt: str) -> str | None:
        """One line from the user, or ``None`` at end of input."""
        self.end_line()
        self.write(prompt)
        line = await anyio.to_thread.run_sync(self.stdin.readline)
        if not line:
            self.write("\n")
            return None
        return line.rstrip("\r\n")


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


async def _play(events: AsyncIterator[Any], term: _Terminal, calls: dict[str, Any]) -> None:
    async for event in events:
        kind = event.type
        if kind == "message_delta" and event.delta.kind == "text" and event.delta.text:
            term.stream("text", "assistant> ", event.delta.text)
        elif kind == "message_delta" and event.delta.kind == "thinking" and event.delta.text:
            term.stream("thinking", "  (thinking) ", event.delta.text)
        elif kind == "message_finished":
            term.end_line()
            for call in event.message.tool_calls:
                calls[call.id] = call
        elif kind == "tool_execution_started":
            term.end_line()
            term.write(f"  [tool] {event.name} {_show(event.arguments)}\n")
        elif kind == "tool_execution_finished":
            result = event.result
            if result.error is not None:
                term.write(f"  [tool error] {event.name}: {result.error.message}\n")
            else:
                term.write(f"  [result] {event.name} {_show(result.value)}\n")
        elif kind == "tool_execution_blocked":
            term.write(f"  [blocked] {event.name}: {event.error.message}\n")
        elif kind == "retry_scheduled":
            seconds = event.delay_ms / 1000
            term.write(f"  [retrying in {seconds:.1f}s] {event.error.message}\n")
        elif kind == "error":
            term.end_line()
            term.write(f"error: {event.error.message}\n")
    term.end_line()


async def _decide(result: Any, term: _Terminal, calls: dict[str, Any]) -> list[dict[str, str]]:
    decisions: list[dict[str, str]] = []
    for pending in result.interruption.pending_decisions:
        call = calls.get(pending.tool_call_id or "")
        what = (
            f"{call.name} {_show(call.arguments)}"
            if isinstance(call, ToolCallContent)
            else pending.scope.tool_name
        )
        answer = await term.ask(f"allow {what}? [y/N] ")
        if answer is not None and answer.strip().lower() in ("y", "yes"):
            decisions.append({"approval_id": pending.approval_id, "outcome": "allow_once"})
        else:
            decisions.append(
                {
                    "approval_id": pending.approval_id,
                    "outcome": "reject_once",
                    "reason": "the user said no",
                }
            )
    return decisions


async def _chat(agent: Agent, term: _Terminal) -> int:
    checkpoints = create_memory_checkpoint_store()
    session = agent.create_session(id=f"chat-{uuid.uuid4().hex[:12]}")
    calls: dict[str, Any] = {}
    while True:
        line = await term.ask("you> ")
        if line is None or line.strip() in ("exit", "quit"):
            return 0
        if not line.strip():
            continue
        stream = session.stream(line, run_state=RunStateOptions(checkpoints, _REVISION))
        await _play(stream, term, calls)
        result = stream.result
        resumed = False
        while result is not None and result.status == "suspended":
            decisions = await _decide(result, term, calls)
            assert result.run_state is not None
            resume = resume_agent_run_stream(
                agent,
                {"run_id": result.run_id, "session_id": result.session_id},
                {"expected_version": result.run_state.version, "decisions": decisions},
                checkpoints=checkpoints,
                definition_revision=_REVISION,
            )
            await _play(resume, term, calls)
            result = resume.result
            resumed = True
        if resumed:
            # The resumed run appended to the store; move this session object to its end.
            await session.checkout()


def run_chat(
    *,
    model: str,
    base_url: str | None = None,
    system: str | None = None,
    plugins: Sequence[object] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the chat until end of input or ``exit``; returns the process exit code.

    ``base_url`` is handed to the provider plugin as ``<PROVIDER>_BASE_URL`` (for example
    ``OPENAI_BASE_URL``). Exit codes: 0 done, 1 no provider, 2 a malformed model string.
    """
    err = stderr or sys.stderr
    try:
        config = ModelConfig.parse(model)
    except ValueError as exc:
        err.write(f"prism chat: {exc}\n")
        return 2
    if base_url:
        os.environ[_env_name(config.provider)] = base_url
    try:
        provider = find_provider(config, plugins)
    except ChatSetupError as exc:
        err.write(f"prism chat: {exc}\n")
        return 1
    agent = create_agent(
        id="prism-chat",
        model=config,
        provider=provider,
        instructions=system or DEFAULT_SYSTEM,
        tools=chat_tools(),
        store=create_memory_session_store(),
        guardrails={
            "tool_input": [Guardrail("ask-before-calculate", "tool_input", _ask_before_calculate)]
        },
    )
    term = _Terminal(stdin or sys.stdin, stdout or sys.stdout)
    term.write(f"prism chat with {config.provider}:{config.model} (exit or Ctrl-D to leave)\n")
    try:
        return anyio.run(_chat, agent, term)
    except KeyboardInterrupt:
        term.write("\n")
        return 130


class ChatCommand:
    """``prism chat --model PROVIDER:MODEL [--base-url URL] [--system TEXT]``."""

    help = "chat with a model in the terminal (two tools)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--model``, ``--base-url`` and ``--system``."""
        parser.add_argument(
            "--model", required=True, metavar="PROVIDER:MODEL", help="openai:gpt-4.1-mini"
        )
        parser.add_argument(
            "--base-url", metavar="URL", help="the provider's base URL (local servers)"
        )
        parser.add_argument("--system", metavar="TEXT", help="the system prompt")

    def run(self, args: argparse.Namespace) -> int:
        """Chat until end of input (:func:`run_chat`)."""
        return run_chat(model=args.model, base_url=args.base_url, system=args.system)


#: The ``chat`` command (entry point ``prism.commands`` → ``chat``).
command = ChatCommand()
