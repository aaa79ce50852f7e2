"""What a ``needs_approval`` check costs per call: asked on the event loop (as the tool round
asks a sync check) against a hop to a worker thread (as sync tools and policies are called),
and what one turn with a sync tool costs without a check, with a sync check and with an async
one (no store: the tool round alone).

Run: ``.venv/bin/python bench/needs_approval.py`` (``--quick`` for fewer samples). Prints the
median and the 90th percentile of each, in microseconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from prism_core import (
    ToolDefinition,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from prism_core._approval_gate import ask_needs_approval
from prism_core._threads import call_sync
from prism_core.content import ToolCallContent
from prism_core.tools import ToolExecutionContext

QUICK = "--quick" in sys.argv
CALLS = 2_000 if QUICK else 20_000
RUNS = 200 if QUICK else 2_000


def _check(args: dict[str, Any], context: Any) -> bool:
    return bool(args["amount"] > 100)


async def _check_async(args: dict[str, Any], context: Any) -> bool:
    return bool(args["amount"] > 100)


def _figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    median = statistics.median(ordered) * 1e6
    p90 = ordered[int(len(ordered) * 0.9)] * 1e6
    return f"median {median:8.1f} us   p90 {p90:8.1f} us"


async def _timed(step: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await step()
        samples.append(time.perf_counter() - started)
    return samples


async def main() -> None:
    call = ToolCallContent("c1", "refund", {"amount": 40})
    context = ToolExecutionContext(
        session_id="s", run_id="r", tool_call_id="c1", tool_name="refund"
    )
    print(f"one check, {CALLS} calls each")
    inline = await _timed(
        lambda: ask_needs_approval("refund", _check, call.arguments, context), CALLS
    )
    print(f"  sync check on the event loop   {_figures(inline)}")
    hop = await _timed(lambda: call_sync(_check, dict(call.arguments), context), CALLS)
    print(f"  sync check in a worker thread  {_figures(hop)}")
    awaited = await _timed(
        lambda: ask_needs_approval("refund", _check_async, call.arguments, context), CALLS
    )
    print(f"  async check                    {_figures(awaited)}")

    print(f"one run of two turns with a sync tool, {RUNS} runs each")
    for label, check in (
        ("no check", False),
        ("sync check", _check),
        ("async check", _check_async),
    ):
        agent = create_agent(
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(
                turns=[
                    [
                        provider_tool_call(tool_call_content("c1", "refund", {"amount": 40})),
                        provider_done(),
                    ],
                    [provider_text_delta("done"), provider_done()],
                ]
            ),
            tools=[ToolDefinition("refund", lambda a, c: "ok", needs_approval=check)],
        )

        async def run(agent: Any = agent) -> None:
            result = await agent.create_session().run("refund 40")
            assert result.status == "succeeded"

        await _timed(run, RUNS // 10)
        print(f"  {label:<12}                   {_figures(await _timed(run, RUNS))}")


if __name__ == "__main__":
    anyio.run(main)
