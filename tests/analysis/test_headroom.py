"""The headroom verdict: which ceiling binds, the thresholds between the verdicts, and the sentence's advice."""

import pytest

from tuner.analysis import COMPUTE_BOUND_AT, INPUT_SHORT_OF, assess, bound_label, rate, record_bound
from tuner.study import TrialRecord


def test_a_loader_short_of_the_model_is_input_bound_and_says_both_rates_and_what_to_try():
    h = assess(5100, 74000, 5200, params={"num_workers": 3, "pin_memory": False}, device="cuda NVIDIA H100",
               data_wait=0.6)
    assert h.bound == "input-bound"
    assert h.of_compute == pytest.approx(5100 / 74000) and h.of_input == pytest.approx(5100 / 5200)
    s = h.sentence
    assert "5.2k samples/s with 3 workers" in s and "could take 74k" in s
    assert "more workers" in s and "pin_memory" in s and "waited for data 60%" in s


def test_without_workers_the_advice_is_to_add_them_and_pinning_is_not_offered_on_a_cpu():
    s = assess(800, 2000, 1000, params={"num_workers": 0}, device="cpu (2 threads)").sentence
    assert "in the training process" in s and "num_workers > 0" in s and "pin_memory" not in s


def test_near_the_compute_ceiling_is_compute_bound_and_suggests_batch_and_precision_not_loader_knobs():
    h = assess(0.92 * 10000, 10000, 50000, params={"precision": "fp32", "num_workers": 4}, device="cuda x")
    assert h.bound == "compute-bound"
    assert "92% of the compute ceiling" in h.sentence and "loader knobs will not help" in h.sentence
    assert "larger batches" in h.sentence and "bf16" in h.sentence
    assert "bf16" not in assess(9200, 10000, 50000, params={"precision": "bf16"}, device="cuda x").sentence


@pytest.mark.parametrize("share, bound", [(COMPUTE_BOUND_AT - 0.01, "overhead-bound"), (COMPUTE_BOUND_AT, "compute-bound")])
def test_the_compute_bound_threshold(share, bound):
    assert assess(share * 1000, 1000, 5000, params={"num_workers": 2}, device="cuda x").bound == bound


@pytest.mark.parametrize("ratio, bound", [(INPUT_SHORT_OF - 0.01, "input-bound"), (INPUT_SHORT_OF, "compute-bound")])
def test_the_input_short_threshold(ratio, bound):
    assert assess(900, 1000, ratio * 1000, device="cuda x").bound == bound


def test_overhead_names_its_likely_cause_by_loader_and_device():
    serial_gpu = assess(500, 1000, 5000, params={"num_workers": 0}, device="cuda x").sentence
    serial_cpu = assess(500, 1000, 5000, params={"num_workers": 0}, device="cpu").sentence
    shared_cores = assess(500, 1000, 5000, params={"num_workers": 2}, device="cpu").sentence
    gpu = assess(500, 1000, 5000, params={"num_workers": 2}, device="cuda x").sentence
    assert "workers would overlap it" in serial_gpu and "per-step overhead" in gpu
    # on a CPU, workers load on the cores the model computes on: not the advice; cheaper loading is
    assert "take turns on the same cores (833 samples/s expected so)" in serial_cpu
    assert "cheaper loading" in serial_cpu and "share the CPU cores" in shared_cores
    assert all(s.startswith("overhead-bound at 50% of the compute ceiling")
               for s in (serial_gpu, serial_cpu, shared_cores, gpu))


def test_without_ceilings_the_data_wait_share_is_the_evidence():
    h = assess(1000, None, None, data_wait=0.45)
    assert h.bound == "input-bound" and "no ceilings measured" in h.sentence and h.of_compute is None
    assert assess(None, None, None).bound == "" and assess(None, None, None).sentence == ""


@pytest.mark.parametrize("wait,label", [(0.45, "input-bound"), (0.2, "mixed"), (0.05, "compute-bound"), (None, "")])
def test_bound_label(wait, label):
    assert bound_label(wait) == label


def test_a_record_prefers_its_ceiling_verdict_over_the_data_wait_share():
    with_ceilings = TrialRecord(trial=1, state="complete", metrics={"data_wait": 0.45, "bound": "compute-bound"})
    older = TrialRecord(trial=2, state="complete", metrics={"data_wait": 0.45})
    assert record_bound(with_ceilings) == "compute-bound" and record_bound(older) == "input-bound"


@pytest.mark.parametrize("value, text", [(830, "830"), (5100, "5.1k"), (74000, "74k"), (125000, "125k"), (2000, "2k")])
def test_rates_are_short(value, text):
    assert rate(value) == text


def test_the_sentence_says_how_far_the_trial_is_from_the_devices_measured_matmul_peak():
    small = assess(9200, 10000, 50000, params={"precision": "fp32"}, device="cpu (x86_64)", of_peak=0.06).sentence
    assert small.startswith("compute-bound at 92% of the compute ceiling (10k samples/s), which is 6% of this CPU's "
                            "measured fp32 matmul peak: the model is too small to fill the device")
    assert "larger batches" in small and "compile" in small and "loader knobs will not help" in small
    busy = assess(9200, 10000, 50000, params={"precision": "bf16"}, device="cuda H100", of_peak=0.7).sentence
    assert "70% of this GPU's measured bf16 matmul peak" in busy and "too small" not in busy
    assert "compile" not in busy
    tf32 = assess(500, 1000, 5000, params={"tf32": True, "num_workers": 2}, device="cuda x", of_peak=0.2).sentence
    assert tf32.endswith("it runs at 20% of this GPU's measured TF32 matmul peak")
    assert "peak" not in assess(9200, 10000, 50000, device="cpu").sentence  # unknown: not guessed


def test_a_share_over_the_peak_says_what_can_cause_it_instead_of_reading_as_a_bug():
    """A ResNet-18 at 112x112 on 2 CPUs read 102% of the CPU's measured fp32 matmul peak."""
    over = assess(9200, 10000, 50000, params={"precision": "fp32"}, device="cpu (x86_64)", of_peak=1.02).sentence
    assert "102% of this CPU's measured fp32 matmul peak (over 100%: the FLOP counter counts each convolution's " \
           "direct work" in over and "busy" in over
    assert "over 100%" not in assess(9200, 10000, 50000, device="cpu", of_peak=0.99).sentence


def test_a_record_carries_its_of_peak_into_the_re_derived_sentence():
    record = TrialRecord(trial=1, state="complete", device="cpu (x86_64)", params={"num_workers": 0},
                         metrics={"throughput": 9200, "compute_ceiling": 10000, "input_ceiling": 50000,
                                  "of_peak": 0.06})
    from tuner.analysis import of_record

    assert "6% of this CPU's measured fp32 matmul peak" in of_record(record).sentence


def test_with_one_ceiling_skipped_the_sentence_names_that_one_not_both():
    """The input ceiling was measured (and shown in the row above): only the compute ceiling is said missing."""
    h = assess(1000, None, 54202, data_wait=0.45)
    assert "no compute ceiling measured" in h.sentence and "no ceilings measured" not in h.sentence
    assert "no input ceiling measured" in assess(1000, 5000, None, data_wait=0.45).sentence
