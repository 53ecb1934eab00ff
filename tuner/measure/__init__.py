"""Measuring trials: timing (throughput) and quality (FID, validation loss)."""
