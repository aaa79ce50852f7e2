"""Session records (prism_core/records/): entries, transcripts, the memory session store."""
