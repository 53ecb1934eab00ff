"""Frechet distance of images to a dataset's training split, comparable across the trials of a study.

FID is only comparable at equal sample count, equal latent seeds, equal real statistics and an equal feature
extractor, so everything that could differ between trials is fixed and cached on disk once per dataset, under
`cache_dir/fid/<dataset slug>/`. One module per job:

- `_cache`: the folder of a (dataset, image size) and file fingerprints (writes and locks: tuner.files);
- `real`: the real images (un-augmented training split, a fixed subset when large);
- `classifier`: the default extractor, a SmallCNN trained once per dataset (`classifier.pt` / `.json`);
- `inception`: torch-fidelity's Inception v3 from a weights file on disk, never downloaded;
- `frechet`: the Frechet distance of classifier features, torchmetrics' arithmetic without its import (1.2-2.6 s);
- `metric`: that (or, for Inception, torchmetrics' FrechetInceptionDistance) with cached real statistics
  (`real-<features>.pt`), and `warm_up_fid`, which pays a process's one-time costs apart from the scoring.
"""

from tuner.measure.fid._cache import dataset_slug, fid_cache_dir, image_size_of
from tuner.measure.fid.classifier import ClassifierFeatures, feature_classifier
from tuner.measure.fid.inception import (
    INCEPTION_DIM,
    INCEPTION_FILE,
    check_fid_weights,
    inception_weights_candidates,
    inception_weights_path,
)
from tuner.measure.fid.metric import FidSetup, fid_of_images, prepare_fid, warm_up_fid
from tuner.measure.fid.real import REAL_MAX_SAMPLES, unaugmented_train

__all__ = [
    "INCEPTION_DIM",
    "INCEPTION_FILE",
    "REAL_MAX_SAMPLES",
    "ClassifierFeatures",
    "FidSetup",
    "check_fid_weights",
    "dataset_slug",
    "feature_classifier",
    "fid_cache_dir",
    "fid_of_images",
    "image_size_of",
    "inception_weights_candidates",
    "inception_weights_path",
    "prepare_fid",
    "unaugmented_train",
    "warm_up_fid",
]
