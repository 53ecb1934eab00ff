"""The two workloads' networks: a DCGAN and a small CNN classifier, both sized from explicit arguments."""

from tuner.models.cnn import SmallCNN
from tuner.models.dcgan import Discriminator, Generator, check_image_size

__all__ = [
    "Discriminator", "Generator", "SmallCNN", "check_image_size",
]
