"""The one list of metrics a trial can carry, with how each is read and shown.

A trial's figures are plain `key: number` entries of its record (see `tuner.study.record`). This list says, once,
what the known keys mean: a label and unit for every view, how to format the value, whether higher is better
(which makes a metric usable as an objective), and whether it is a column of the trial tables. The terminal table,
the HTML report, trials.csv, the export's provenance and the search's live view all iterate over it, so a new
metric lands here and nowhere else. Keys a workload's `evaluate` returns that are not listed (a user's
`val_elbo`, say) are shown with generic formatting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["rate", "percent", "number", "seconds", "mb", "count", "text", "flag", "si"]
Group = Literal["speed", "quality", "cost", "info"]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # short column header
    help: str  # one line: what it is and how it was measured
    fmt: Format = "number"
    direction: Literal["maximize", "minimize"] | None = None  # None: not an objective
    group: Group = "speed"
    column: bool = False  # a column of the trial tables (terminal, HTML, trials.csv)
    unit: str = ""


METRICS: tuple[Metric, ...] = (
    Metric("throughput", "throughput", "training samples/s over the timed windows: all their samples / all their "
           "seconds, as a plain loop times N steps (warm-up excluded, device synchronized at each clock read, data "
           "loading included)", "rate", "maximize", column=True, unit="samples/s"),
    Metric("unit_throughput", "units/s", "throughput in the workload's own unit (its sample_unit: tokens, "
           "pixels): samples/s x the units per sample of the batches trained on (Workload.sample_size), so "
           "variable-length batches compare", "rate", "maximize", column=True, unit="units/s"),
    Metric("throughput_spread", "spread", "(max - min) / median of the windows' samples/s: how steady the "
           "measurement was", "percent", "minimize", column=True),
    Metric("throughput_median", "median window", "the median window's samples/s: what throughput reads without "
           "its slow windows (an epoch boundary, a loader worker's hiccup)", "rate", unit="samples/s"),
    Metric("data_wait", "data wait", "share of timed time spent waiting for the next batch (input-bound when "
           "high)", "percent", "minimize", column=True),
    Metric("compute_ceiling", "compute ceiling", "samples/s of the same model, batch and precision fed one batch "
           "already on the device (no loader): what it could take if input were free", "rate", group="info",
           unit="samples/s"),
    Metric("input_ceiling", "input ceiling", "samples/s the trial's DataLoader delivers alone (same knobs, "
           "host-to-device copy included, no model)", "rate", group="info", unit="samples/s"),
    Metric("of_compute_ceiling", "% compute", "throughput / compute ceiling: how close the trial gets to what "
           "its model allows", "percent", group="info", column=True),
    Metric("of_input_ceiling", "% input", "throughput / input ceiling: how much of what its loader delivers the "
           "trial uses", "percent", group="info", column=True),
    Metric("of_peak", "% peak", "achieved FLOP/s (throughput x flops_per_sample) / the device's measured matmul "
           "peak in the trial's precision (peak_flops): how much of what the hardware can compute the trial uses",
           "percent", group="info", column=True),
    Metric("flops_per_sample", "FLOPs/sample", "FLOPs per training sample of one training step (forward, backward, "
           "optimizer) as torch.utils.flop_counter counts them: matmuls, convolutions and fused attention; "
           "elementwise work is not counted", "si", group="info", unit="FLOP"),
    Metric("peak_flops", "peak FLOP/s", "the device's matmul peak measured on this machine (large square matmuls "
           "in the trial's precision, TF32 where enabled), cached per machine, device and the knobs it depends on "
           "(precision, TF32, threads, the OpenMP wait policy)", "si",
           group="info", unit="FLOP/s"),
    Metric("of_peak_skipped", "of_peak skipped", "why of_peak is missing: the FLOP counter could not follow the "
           "model's step, counted no FLOPs, or the peak could not be measured", "text", group="info"),
    Metric("of_peak_seconds", "of_peak s", "seconds spent counting FLOPs and measuring the peak (one-time costs, "
           "about 0 when both came from caches; after wall_seconds, like set-up)", "seconds", group="cost",
           unit="s"),
    Metric("suspect", "suspect", "why the reading cannot be trusted on its own: windows that disagree beyond the "
           "study's noise floor, or throughput above 105% of its own compute ceiling (tuner.analysis.suspect); such a "
           "trial wins the study only if its confirmation re-runs clear it", "text", group="info", column=True),
    Metric("bound", "bound", "input-bound, compute-bound or overhead-bound, from the two ceilings (the data-wait "
           "share alone when they are missing)", "text", group="info"),
    Metric("headroom", "headroom", "why the trial is as fast as it is and what to try, from its ceilings",
           "text", group="info"),
    Metric("peak_mem_mb", "peak MB", "peak memory: CUDA max allocated, or on the CPU the largest sampled memory of "
           "the process and its loader workers, each counting its share of shared pages (PSS; USS where there is none)",
           "mb", "minimize", "cost", column=True, unit="MB"),
    Metric("train_seconds", "train s", "wall time of the training loop, warm-up included", "seconds", "minimize",
           "cost", column=True, unit="s"),
    Metric("wall_seconds", "wall s", "wall time from the first training step to the end of the ceilings: training, "
           "scoring and ceilings (the budget plus its margin bounds it; set-up before training is not in it)",
           "seconds", group="cost", unit="s"),
    Metric("step_seconds", "step s", "one optimizer step's wall time at the end of warm-up (device synced; the "
           "slowest rank under DDP)", "seconds", group="info", unit="s"),
    Metric("compile_seconds", "compile s", "torch.compile's first steps, until one step compiles nothing (the "
           "compiled graphs run): outside the budget's timed part and the windows; ~0 when this process had "
           "compiled the same models already", "seconds", group="cost", column=True, unit="s"),
    Metric("compile_steps", "compile steps", "steps torch.compile's compilation took (before warm-up)", "count",
           group="info"),
    Metric("graph_breaks", "graph breaks", "where torch.compile split the models' graphs (torch._dynamo's "
           "counters; each break runs Python between two compiled graphs)", "count", group="info"),
    Metric("recompiles", "recompiles", "frames torch.compile compiled again after its first steps, while timed "
           "steps ran (a shape, grad mode or attribute its guards did not expect)", "count", group="info"),
    Metric("eager_throughput", "eager", "samples/s of the same config in eager mode that the compile break-even "
           "compares with (tuner train: the pre-flight's eager steps)", "rate", group="info", unit="samples/s"),
    Metric("compile_break_even_s", "compile pays back", "wall seconds of training after which the compiled run "
           "is ahead of eager, its compile time included (missing: never, it is no faster)", "seconds",
           group="info", unit="s"),
    Metric("goodput", "goodput", "useful samples/s: throughput x efficiency (Pollux's goodput), so a config whose "
           "larger effective batch needs more samples to the same loss is not ranked by its speed alone; not an "
           "objective", "rate", group="info", column=True, unit="samples/s"),
    Metric("efficiency", "efficiency", "statistical efficiency: progress per training sample at this trial's "
           "effective batch M against the baseline's M0, (phi + M0) / (phi + M) with phi the baseline's gradient "
           "noise scale (tuner.analysis.goodput); 1 / efficiency is how many times the baseline's samples it needs "
           "(the terminal table shows it in the goodput cell)", "number", group="info", column=True),
    Metric("noise_scale", "noise scale", "gradient noise scale B_simple = tr(Sigma) / |G|^2 of the trained model "
           "(McCandlish et al. 2018): squared gradient norms at the batch size and 4x it, in an untimed pass after "
           "training (tuner.train.noise; in a study, the baseline's alone); about the effective batch beyond which a "
           "larger one buys little",
           "number", group="info"),
    Metric("baseline_noise_scale", "baseline noise scale", "the baseline trial's noise scale that efficiency is "
           "computed from", "number", group="info"),
    Metric("effective_batch", "effective batch", "batch_size x accumulation_steps x ranks: the samples of one "
           "optimizer step", "count", group="info"),
    Metric("noise_scale_skipped", "noise scale skipped", "why the noise scale is missing: a workload of several "
           "phases (a GAN), too few pairs within its seconds, a true gradient swamped by noise, or a search trial "
           "(efficiency reads the baseline's alone)", "text",
           group="info"),
    Metric("noise_seconds", "noise s", "seconds of the noise scale's untimed pass (after wall_seconds, like "
           "of_peak's)", "seconds", group="cost", unit="s"),
    Metric("time_to_target", "to target s", "training seconds from the loop's start to the first evaluation that "
           "met the study's target (evaluations every K samples, their time left out: target_eval_seconds); "
           "missing: not reached; an objective (min) of a study with a target", "seconds", group="cost", column=True,
           unit="s", direction="minimize"),
    Metric("samples_to_target", "to target samples", "training samples at the first evaluation that met the "
           "study's target (moves with the seed, not with the machine's load); missing: not reached", "count",
           group="cost", column=True, direction="minimize"),
    Metric("estimated_time_to_target", "est. to target s", "samples_to_target / throughput (the samples/s "
           "of the timed windows): the time to target the trial's measured speed gives, which moves less with a "
           "shared machine's load than the wall clock to one evaluation (time_to_target); missing: not reached",
           "seconds", group="cost", unit="s"),
    Metric("target_eval_seconds", "target eval s", "wall seconds of the evaluations every K samples a study with a "
           "target makes (outside the timed windows and time_to_target; MLPerf counts them in)", "seconds",
           group="cost", unit="s"),
    Metric("warmup_steps", "warm-up steps", "untimed steps before the windows: until the step time settled",
           "count", group="info"),
    Metric("samples", "samples", "training samples consumed (micro-batch x micro-steps, all ranks)", "count",
           group="info"),
    Metric("steps", "steps", "optimizer steps", "count", group="info"),
    Metric("skipped_windows", "skipped windows", "timed windows not started: at the pace of the windows so far "
           "they could not have ended within a step of the budget (a step that slowed since the pre-flight, a busy "
           "machine); the figures stand on the windows that ran", "count", group="info"),
    Metric("fid", "FID", "Frechet distance of generated to training images (lower is better; compare only at "
           "equal fid_features and fid_samples)", "number", "minimize", "quality", unit=""),
    Metric("loss", "val loss", "mean loss on the fixed held-out split", "number", "minimize", "quality"),
    Metric("accuracy", "accuracy", "accuracy on the fixed held-out split", "percent", "maximize", "quality"),
    Metric("fid_classifier_accuracy", "FID classifier acc.", "held-out accuracy of the FID feature classifier",
           "percent", group="info"),
    Metric("fid_features", "FID features", "feature extractor of the FID (classifier or inception)", "text",
           group="info"),
    Metric("fid_samples", "FID samples", "generated images per FID", "count", group="info"),
    Metric("quality_seconds", "quality s", "seconds spent scoring quality after training", "seconds", "minimize",
           "cost", unit="s"),
    Metric("ceiling_seconds", "ceiling s", "seconds spent measuring the two ceilings (0 when both came from the "
           "study's cache)", "seconds", group="cost", unit="s"),
    Metric("ceiling_skipped", "ceiling skipped", "why a ceiling was not measured: its deadline "
           "(measure.ceiling_seconds) could not hold enough steps", "text", group="info"),
    Metric("quality_setup_seconds", "quality setup s", "one-time seconds before scoring (caches, extractor, "
           "first device linear algebra); not part of quality_seconds", "seconds", group="cost", unit="s"),
)

BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
TARGET_COLUMNS = ("time_to_target", "samples_to_target")  # a study's tables show them when it has a target
# Figures a run that did not reach the target lacks by meaning (not reached), not because it failed to measure:
# confirmed over the re-runs with the not-reached runs counted (tuner.analysis.stats.confirmed).
TO_TARGET: tuple[str, ...] = (*TARGET_COLUMNS, "estimated_time_to_target")
OBJECTIVE_METRICS: tuple[str, ...] = tuple(m.key for m in METRICS if m.direction is not None)


def metric(key: str) -> Metric:
    """The metric's description; an unknown key (a user workload's own quality metric) gets a generic one."""
    return BY_KEY.get(key) or Metric(key, key.replace("_", " "), "reported by the workload's evaluate()",
                                     "number", group="quality")


def unit_suffix(key: str, record: Any) -> str:
    """` tokens/s` after a unit_throughput cell, from the trial's declared sample_unit; '' for other keys."""
    unit = record.get("sample_unit") if key == "unit_throughput" else None
    return f" {unit}/s" if isinstance(unit, str) and finite(record.get(key)) is not None else ""


def table_columns() -> list[Metric]:
    """The metrics every trial table shows after the objectives, in this order."""
    return [m for m in METRICS if m.column]


def finite(value: Any) -> float | None:
    """A finite number as float, else None (missing, NaN, inf, bool, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
