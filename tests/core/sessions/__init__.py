"""Sessions (prism_core/sessions/): the agent session and its features."""
