"""The run loop (prism_core/runs/): turns, tools, loops, streams, sub-agents, plans."""
