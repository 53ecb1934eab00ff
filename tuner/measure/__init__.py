"""Measuring trials: timing (throughput) and quality (FID, validation loss)."""

__all__ = ["ceiling", "fid", "parity", "profile", "quality", "timing"]  # its modules, each imported by name
