"""LangGraph's side of ``bench/compare_langgraph.py``: the agent loop as a ``StateGraph``, its
mock model, and its runs, crashes and resumes on LangGraph's async checkpointers.

Imported only when LangGraph is installed (the root ``bench`` extra).
"""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict

import psycopg
from _support import WorkerDied, tool_output
from durable import QUESTION
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

__all__ = (
    "FINAL_ANSWER",
    "GraphBench",
    "MockModel",
    "open_saver",
    "pg_conninfo",
    "resume_graph",
)

FINAL_ANSWER = "Root cause: api-3 exhausted its connection pool at 12:41."


class State(TypedDict):
    """The graph's state: the conversation, merged by ``add_messages``."""

    messages: Annotated[list[AnyMessage], add_messages]


class MockModel:
    """The LangGraph twin of :class:`_support.Investigation`: one ``probe`` call per turn
    (the turn taken from the AI messages so far, so a resumed run continues the script), then
    the answer; ``calls`` holds the ``perf_counter`` time of every call."""

    def __init__(self, turns: int, *, die_at: int | None = None) -> None:
        self.turns = turns
        self.die_at = die_at
        self.calls: list[float] = []

    async def agent(self, state: State) -> dict[str, list[AnyMessage]]:
        self.calls.append(time.perf_counter())
        index = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if index == self.die_at:
            raise WorkerDied()
        if index < self.turns:
            call = {"id": f"call_{index:03d}", "name": "probe", "args": {"step": index}}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=FINAL_ANSWER)]}


async def tools(state: State) -> dict[str, list[AnyMessage]]:
    """Run every tool call of the last AI message (here: one ``probe``)."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    results: list[AnyMessage] = [
        ToolMessage(content=tool_output(int(call["args"]["step"])), tool_call_id=call["id"])
        for call in last.tool_calls
    ]
    return {"messages": results}


def route(state: State) -> str:
    """To the tools while the model asks for them, else to the end."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_graph(model: MockModel, checkpointer: Any) -> Any:
    """The agent loop as a compiled graph, with ``checkpointer`` (``None``: no persistence)."""
    builder = StateGraph(State)
    builder.add_node("agent", model.agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def graph_config(thread_id: str, turns: int) -> dict[str, Any]:
    """The run config: the thread, and room for two steps per turn."""
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * turns + 10}


def died(exc: BaseException) -> bool:
    """Whether ``exc`` is (or only wraps) the simulated worker death."""
    if isinstance(exc, WorkerDied):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(WorkerDied) is not None


class GraphBench:
    """LangGraph runs on one checkpointer, mirroring :class:`durable.Bench`."""

    def __init__(self, saver: Any, backend: str, turns: int) -> None:
        self.saver = saver
        self.backend = backend
        self.turns = turns

    async def investigate(self, durable: bool) -> tuple[float, str]:
        """One complete run; ``(seconds, thread_id)``."""
        model = MockModel(self.turns)
        graph = build_graph(model, self.saver if durable else None)
        thread_id = f"t-{uuid.uuid4().hex}"
        start = time.perf_counter()
        state = await graph.ainvoke(
            {"messages": [HumanMessage(content=QUESTION)]},
            graph_config(thread_id, self.turns),
            durability="sync" if durable else None,
        )
        elapsed = time.perf_counter() - start
        if state["messages"][-1].content != FINAL_ANSWER:
            raise RuntimeError("the LangGraph run did not reach the answer")
        return elapsed, thread_id

    async def crash(self) -> str:
        """A durable run that dies at the model call after its last tool turn; its thread."""
        model = MockModel(self.turns, die_at=self.turns)
        graph = build_graph(model, self.saver)
        thread_id = f"t-{uuid.uuid4().hex}"
        try:
            await graph.ainvoke(
                {"messages": [HumanMessage(content=QUESTION)]},
                graph_config(thread_id, self.turns),
                durability="sync",
            )
        except BaseException as exc:
            if not died(exc):
                raise
        else:
            raise RuntimeError("the LangGraph worker was meant to die")
        return thread_id

    async def resume(self, thread_id: str) -> float:
        """Continue a crashed thread; seconds from the call to the model's next call."""
        return await resume_graph(self.saver, thread_id, self.turns)

    async def bytes_written(self, thread_id: str) -> int:
        """Payload bytes of the thread's rows: checkpoints (+ blobs on PostgreSQL) + writes."""
        if self.backend == "sqlite":
            queries = (
                "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                "FROM checkpoints WHERE thread_id = ?",
                "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?",
            )
            total = 0
            for query in queries:
                async with self.saver.conn.execute(query, (thread_id,)) as cursor:
                    row = await cursor.fetchone()
                    total += int(row[0])
            return total
        queries = (
            "SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)),"
            " 0) AS n FROM checkpoints WHERE thread_id = %s",
            "SELECT coalesce(sum(octet_length(blob)), 0) AS n FROM checkpoint_blobs "
            "WHERE thread_id = %s",
            "SELECT coalesce(sum(octet_length(blob)), 0) AS n FROM checkpoint_writes "
            "WHERE thread_id = %s",
        )
        total = 0
        async with self.saver.conn.cursor() as cursor:
            for query in queries:
                await cursor.execute(query, (thread_id,))
                row = await cursor.fetchone()
                total += int(row["n"])
        return total


async def resume_graph(saver: Any, thread_id: str, turns: int) -> float:
    """Continue ``thread_id`` with a fresh graph; seconds until the model is called."""
    model = MockModel(turns)
    graph = build_graph(model, saver)
    gc.collect()
    start = time.perf_counter()
    state = await graph.ainvoke(None, graph_config(thread_id, turns), durability="sync")
    if not model.calls or state["messages"][-1].content != FINAL_ANSWER:
        raise RuntimeError("the continued LangGraph run did not reach the answer")
    return model.calls[0] - start


def pg_conninfo(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path."""
    return psycopg.conninfo.make_conninfo(url, options=f"-c search_path={schema}")


@asynccontextmanager
async def open_saver(backend: str, location: str) -> AsyncIterator[Any]:
    """LangGraph's async checkpointer on ``location`` (a SQLite path, or a conninfo)."""
    if backend == "sqlite":
        async with AsyncSqliteSaver.from_conn_string(location) as saver:
            await saver.conn.execute("PRAGMA synchronous=FULL")
            yield saver
    else:
        async with AsyncPostgresSaver.from_conn_string(location) as saver:
            yield saver
