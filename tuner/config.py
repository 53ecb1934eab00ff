"""Typed, validated trial configuration: the file `tuner train --config` reads and `tuner export` writes.

One `TrialConfig` describes one training run completely (workload, dataset, budget, knobs), so it can be
saved with every trial and run again bit-for-bit in settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tuner.errors import ConfigError

Precision = Literal["fp32", "fp16", "bf16"]
DeviceKind = Literal["auto", "cpu", "cuda"]
FidFeatures = Literal["classifier", "inception"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Params(_Strict):
    """The knobs. Loader knobs change speed only; batch, accumulation, precision and optimizer change the model."""

    batch_size: int = Field(64, ge=1, le=65536, description="micro-batch size per step")
    accumulation_steps: int = Field(1, ge=1, le=1024, description="micro-batches per optimizer step")
    num_workers: int = Field(0, ge=0, le=128)
    prefetch_factor: int | None = Field(None, ge=1, le=64, description="only with num_workers > 0")
    pin_memory: bool = Field(False, description="only with CUDA")
    persistent_workers: bool = Field(False, description="only with num_workers > 0")
    precision: Precision = "fp32"
    tf32: bool = Field(False, description="TF32 for fp32 matmuls/convolutions (CUDA, Ampere or newer)")
    lr: float | None = Field(None, gt=0, le=10, description="the optimizer's lr (default: the workload's own)")
    lr_scale: float | None = Field(None, gt=0, le=1000, description="multiplies the lr (the workload's own, or "
                                   "params.lr): spaces search lr relative to the workload's")
    beta1: float | None = Field(None, ge=0, lt=1, description="default: the workload's own betas")
    beta2: float | None = Field(None, ge=0, lt=1, description="default: the workload's own betas")
    threads: int | None = Field(None, ge=1, le=1024, description="torch CPU compute threads (default: torch's)")
    seed: int = Field(0, ge=0)
    device: DeviceKind = "auto"

    @model_validator(mode="after")
    def _loader_combinations(self) -> "Params":
        if self.num_workers == 0 and self.prefetch_factor is not None:
            raise ValueError("prefetch_factor needs num_workers > 0 (set num_workers or drop prefetch_factor)")
        if self.num_workers == 0 and self.persistent_workers:
            raise ValueError("persistent_workers needs num_workers > 0 (set num_workers or drop persistent_workers)")
        return self

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps


class Budget(_Strict):
    """How long a trial trains: by wall seconds or by training samples, exactly one."""

    seconds: float | None = Field(None, gt=0)
    samples: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> "Budget":
        if (self.seconds is None) == (self.samples is None):
            raise ValueError("give exactly one of budget.seconds or budget.samples")
        return self

    def describe(self) -> str:
        return f"{self.seconds:g} seconds" if self.seconds is not None else f"{self.samples} samples"


class Measure(_Strict):
    """How throughput is measured: warm-up excluded, then several timed windows."""

    warmup_steps: int = Field(3, ge=0, le=10000, description="optimizer steps left out of timing")
    windows: int = Field(5, ge=1, le=1000, description="timed windows; median and spread are over these")
    ceiling_seconds: float = Field(1.0, ge=0, le=600, description="at most this long for each of the two ceilings "
                                   "(compute, input), and at most a tenth of the training time; 0: none")


class Quality(_Strict):
    """How the trained model is scored. FID settings must be equal across the trials of a study."""

    enabled: bool = True
    fid_features: FidFeatures = "classifier"
    fid_weights: Path | None = Field(None, description="Inception weights file for fid_features=inception")
    fid_samples: int = Field(1000, ge=16, le=100000, description="generated images per FID (same N in a study)")
    fid_seed: int = Field(1234, ge=0, description="latent seed of the generated images")


class TrialConfig(_Strict):
    """Everything one training run needs."""

    workload: str = Field("gan", min_length=1, description="gan, cnn, package.module:make or path/to/file.py:make")
    workload_options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    dataset: str | None = Field(None, description="passed to the workload factory as dataset= when set")
    budget: Budget = Field(default_factory=lambda: Budget(seconds=20))
    params: Params = Field(default_factory=Params)
    measure: Measure = Field(default_factory=Measure)
    quality: Quality = Field(default_factory=Quality)
    gpus: int = Field(1, ge=0, le=1024, description="GPUs for this trial; > 1 runs DDP through Ray Train")
    provenance: dict[str, Any] | None = Field(None, description="written by `tuner export`; ignored by training")

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "image_size" in data:
            raise ValueError("moved to workload_options.image_size (an option of the built-in gan and cnn)")
        return data

    @property
    def builtin(self) -> bool:
        from tuner.workload.loader import BUILTINS

        return self.workload in BUILTINS


def format_validation_error(err: ValidationError, source: str) -> str:
    """One line naming the source and the first offending key."""
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    if key == "(top level)" and "moved to workload_options.image_size" in first["msg"]:
        key = "image_size"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    extra = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {key}: {msg}{extra}"


def parse_config(data: Any, source: str = "config") -> TrialConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with keys workload, dataset, budget, params")
    try:
        return TrialConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source)) from None


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from a readable UTF-8 file; anything else is a ConfigError naming the file."""
    from tuner.files import load_yaml_mapping

    return load_yaml_mapping(Path(path), "config file")


def load_config(path: Path) -> TrialConfig:
    """Read and validate a config file; errors name the file and the key."""
    return parse_config(load_yaml(path), str(path))


def dump_config(cfg: TrialConfig) -> dict[str, Any]:
    """Plain-YAML-able dict of a config (paths as strings, unset optionals dropped)."""
    return cfg.model_dump(mode="json", exclude_none=True)
