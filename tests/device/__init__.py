"""Stand-ins for an accelerator on CPU-only machines (a simulated device, an NCCL-like process group)."""
