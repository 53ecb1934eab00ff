"""tuner: find PyTorch training settings that train fast without training worse."""

__version__ = "0.1.0"
