"""Resuming durable runs (prism_core/resume/): decisions, continues, restores, listing and
observing."""
