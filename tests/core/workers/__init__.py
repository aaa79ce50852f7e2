"""Workers (prism_core/workers/): sweeps, claims and delivery."""
