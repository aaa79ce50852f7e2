"""The durable layer (prism_core/durable/): state, checkpoints, leases, fencing, receipts,
the ledger and the outbox."""
