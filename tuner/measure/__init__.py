"""Measuring trials: timing (throughput) and quality (FID, validation loss)."""

# Its modules, each imported by name (a caller imports only the one it needs; several import torch).
__all__ = ["batch_stats", "ceiling", "fid", "flops", "load", "noise_scale", "profile", "quality", "timing"]
