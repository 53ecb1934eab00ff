"""Datasets by spec string (digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR) and loaders."""

from tuner.data.batch import batch_len, checked_collate, to_channels_last, to_device
from tuner.data.datasets import check_dataset, load_datasets
from tuner.data.loader import make_loader, prefetch_depth
from tuner.data.spec import DatasetSpec, Datasets, parse_dataset_spec

__all__ = [
    "DatasetSpec", "Datasets", "batch_len", "check_dataset", "checked_collate", "load_datasets", "make_loader",
    "parse_dataset_spec", "prefetch_depth", "to_channels_last", "to_device",
]
