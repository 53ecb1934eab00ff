"""Datasets by spec string (digits, synthetic, mnist:DIR, fashion_mnist:DIR, cifar10:DIR, folder:DIR) and loaders."""

from tuner.data.datasets import Datasets, check_dataset, load_datasets, parse_dataset_spec
from tuner.data.loader import make_loader

__all__ = ["Datasets", "check_dataset", "load_datasets", "make_loader", "parse_dataset_spec"]
