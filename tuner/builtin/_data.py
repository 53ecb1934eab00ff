"""The built-ins' data: a dataset spec (digits, mnist:DIR, ...) loaded once per trial process, lazily, because the
cache folder comes from the running trial."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.data import Datasets

# What a built-in's time-to-target evaluations score while training (Workload.target_eval_samples; issue 51): a
# fixed subset of 128 validation samples (the CNN), the FID of 128 generated images (the GAN). On 2 CPU cores that
# costs a third of the whole digits split's scoring (the CNN) and a quarter of a 500-image FID (the GAN), so K can
# hold the 10 or more evaluations before the baseline's target that a 15 s study's reference run lacked.
TARGET_EVAL_SAMPLES = 128


class SpecData:
    """`get()` loads the spec's Datasets on first use (in the trial: its cache dir and seed) and keeps them."""

    def __init__(self, spec: str, image_size: int) -> None:
        from tuner.data import check_dataset

        check_dataset(spec)  # a malformed spec or a missing folder fails when the workload is built, not mid-trial
        self.spec, self.image_size = spec, image_size
        self._data: Datasets | None = None

    def get(self) -> "Datasets":
        if self._data is None:
            from tuner.data import load_datasets
            from tuner.workload import trial_context

            ctx = trial_context()
            self._data = load_datasets(self.spec, self.image_size, ctx.cache_dir, seed=ctx.seed)
        return self._data

    def splits(self) -> tuple[object, object]:
        data = self.get()
        return data.train, data.val
