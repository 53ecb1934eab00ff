"""Measuring trials: timing (throughput) and quality (FID, validation loss)."""

__all__ = ["batch_stats", "ceiling", "fid", "noise_scale", "parity", "profile", "quality", "timing"]  # its modules, each imported by name
