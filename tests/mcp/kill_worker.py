"""A worker that calls the hostile server's ``slow_effect`` over stdio and waits for it: the
test SIGKILLs this process while the server holds the call.

    python kill_worker.py EFFECTS SECONDS
"""

from __future__ import annotations

import sys

import anyio

from prism_core import ToolExecutionContext
from prism_mcp import MCPServerStdio, mcp_tools

HOSTILE = str(
    __import__("pathlib").Path(__file__).resolve().parent / "servers" / "hostile_server.py"
)


async def main(effects: str, seconds: float) -> None:
    server = MCPServerStdio(sys.executable, [HOSTILE, effects, "http://127.0.0.1:9/unused"])
    async with mcp_tools(server, call_timeout=600) as tools:
        (slow,) = [tool for tool in tools if tool.name == "slow_effect"]
        context = ToolExecutionContext(
            session_id="s1",
            run_id="run-1",
            tool_call_id="c1",
            tool_name="slow_effect",
            fencing_token=3,
        )
        await slow.execute({"seconds": seconds, "entry": "late"}, context)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], float(sys.argv[2]))
