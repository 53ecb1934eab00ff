"""run_trial end to end on the CPU: states (complete, oom, diverged), fake-CUDA branches, every dataset format."""

import pytest
import torch

from tuner.config import parse_config
from tuner.errors import DeviceError
from tuner.models import SmallCNN
from tuner.train import run_trial
from tuner.train.step import PhaseStep
from tests.helpers.datafiles import write_cifar, write_mnist, write_tree
from tests.helpers.fakes import FakeCudaDevice, TickingClock


def cfg(**over):
    base = {"workload": "cnn", "dataset": "synthetic", "workload_options": {"image_size": 16},
            "budget": {"samples": 160},
            "params": {"batch_size": 8}, "measure": {"warmup_steps": 1, "windows": 3, "ceiling_seconds": 0.5},
            "quality": {"enabled": False}}
    for k, v in over.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return parse_config(base)


def test_complete_trial_reports_every_figure(tmp_path):
    res = run_trial(cfg(), cache_dir=tmp_path).to_json()
    assert res["state"] == "complete" and res["error"] is None
    assert res["throughput"] > 0 and len(res["windows"]) == 3
    assert res["throughput_spread"] >= 0 and 0 <= res["data_wait"] <= 1
    assert res["peak_mem_mb"] > 0 and res["train_seconds"] > 0
    assert res["samples"] >= 160 and res["steps"] == res["samples"] // 8
    assert len(res["loss_curve"]) == 3


def test_out_of_memory_becomes_the_oom_state(tmp_path, monkeypatch):
    calls = []

    def boom(self, batches):
        calls.append(1)
        if len(calls) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return PhaseStep.__call__.__wrapped__(self, batches)

    boom.__wrapped__ = PhaseStep.__call__
    monkeypatch.setattr(PhaseStep, "__call__", boom)
    res = run_trial(cfg(), cache_dir=tmp_path)
    assert res.state == "oom"
    assert "Tried to allocate 2.00 GiB" in res.error
    assert res.throughput is None


def test_host_memory_exhausted_in_a_cpu_trial_is_oom_not_error(tmp_path, monkeypatch):
    """torch's CPU allocator raises a plain RuntimeError ("[enforce fail at alloc_cpu.cpp:N] ...
    DefaultCPUAllocator: can't allocate memory"); a real one, from an allocation no host can satisfy."""
    original = SmallCNN.forward

    def hungry(self, x):
        torch.empty(2**55, dtype=torch.uint8)  # 32 PiB: beyond any address space, refused at once
        return original(self, x)

    monkeypatch.setattr(SmallCNN, "forward", hungry)
    res = run_trial(cfg(params={"device": "cpu"}), cache_dir=tmp_path)
    assert res.state == "oom", res.error
    assert "DefaultCPUAllocator" in res.error and res.throughput is None


def test_non_finite_loss_becomes_the_diverged_state(tmp_path, monkeypatch):
    original = SmallCNN.forward
    monkeypatch.setattr(SmallCNN, "forward", lambda self, x: original(self, x) * float("inf"))
    res = run_trial(cfg(), cache_dir=tmp_path)
    assert res.state == "diverged" and "non-finite" in res.error


def test_cuda_branches_sync_before_each_clock_read_and_pin_memory(tmp_path):
    dev = FakeCudaDevice()
    res = run_trial(cfg(params={"pin_memory": True, "precision": "fp16"}), cache_dir=tmp_path, device=dev,
                    clock=TickingClock(0.01))  # time in clock reads: the ceilings fit their deadline at any load
    assert res.state == "complete"
    # a sync before the clock at each window's start and end (the training's 3 windows, then each ceiling's),
    # and after each untimed warm-up step
    assert dev.sync_calls >= 2 * 3 + res.value("warmup_steps") + 2 * 2 * 2
    assert res.value("input_ceiling") is not None and res.value("compute_ceiling") is not None
    assert res.device == "cuda (fake GPU)"


def test_pin_memory_on_cpu_is_refused(tmp_path):
    with pytest.raises(DeviceError, match="pin_memory"):
        run_trial(cfg(params={"pin_memory": True, "device": "cpu"}), cache_dir=tmp_path)


@pytest.mark.parametrize("workload", ["gan", "cnn"])
@pytest.mark.parametrize("fmt", ["mnist", "fashion_mnist", "cifar10", "folder"])
def test_both_workloads_train_on_every_file_format(tmp_path, workload, fmt):
    root = tmp_path / "data"
    if fmt in ("mnist", "fashion_mnist"):
        write_mnist(root, "MNIST" if fmt == "mnist" else "FashionMNIST", n_train=24, n_test=8)
    elif fmt == "cifar10":
        write_cifar(root, n_per_batch=6, n_test=8)
    else:
        write_tree(root, {"a": 12, "b": 12})
    res = run_trial(cfg(workload=workload, dataset=f"{fmt}:{root}", budget={"samples": 48}),
                    cache_dir=tmp_path / "cache")
    assert res.state == "complete", res.error
    assert res.get("samples") >= 48


def test_a_generator_that_emits_nan_images_is_diverged_not_a_nan_fid(tmp_path, monkeypatch):
    from tuner.models import Generator

    original = Generator.forward
    monkeypatch.setattr(Generator, "forward",
                        lambda self, z: original(self, z) * (float("nan") if not self.training else 1.0))
    data = write_tree(tmp_path / "data", {"a": 12, "b": 12})  # tiny: the FID classifier trains in a blink
    res = run_trial(cfg(workload="gan", dataset=f"folder:{data}", budget={"samples": 48},
                        quality={"enabled": True, "fid_samples": 16}), cache_dir=tmp_path / "cache")
    assert res.state == "diverged" and "quality metric fid is not finite" in res.error
    assert res.to_json()["fid"] is None


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"),
                                   RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED")])
def test_an_oom_outside_the_loop_is_oom_and_memory_is_freed_after_the_except_block(tmp_path, monkeypatch, error):
    """Building or moving the models (or a cuDNN workspace) can run out of memory too: still `oom`, and the memory
    is returned once the traceback that holds the activations is gone."""
    import sys

    import tuner.train._build as build_mod

    freed_in_except = []

    class Dev(FakeCudaDevice):
        def free_memory(self):
            freed_in_except.append(sys.exc_info()[0] is not None)

    def boom(*a, **k):
        raise error

    monkeypatch.setattr(build_mod, "build_models", boom)
    res = run_trial(cfg(params={"device": "cpu"}), cache_dir=tmp_path, device=Dev())
    assert res.state == "oom" and str(error).split(".")[0] in res.error
    assert freed_in_except == [False]


def test_threads_and_tf32_settings_do_not_leak_into_the_next_trial(tmp_path):
    from tuner.config import Params
    from tuner.device import Device

    before = torch.get_num_threads()
    run_trial(cfg(params={"threads": 1 if before > 1 else 2}), cache_dir=tmp_path)
    assert torch.get_num_threads() == before  # a reused Ray actor gets its own setting back
    cuda = Device("cuda", torch.device("cuda", 0), "flags only")  # numerics() only sets flags: no GPU needed
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with cuda.numerics(Params(tf32=True)):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with cuda.numerics(Params(tf32=False)):
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32  # explicit, not
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == flags   # cuDNN's default


def test_a_trial_records_the_environment_it_ran_under_and_a_configs_env_sets_its_threads(tmp_path, monkeypatch):
    """What a user's loop needs to read what the trial read (the export writes it): the variables that change
    torch's speed and torch's thread count. A config's env: OMP_NUM_THREADS applies in a process whose torch
    loaded before it (export --verify) as its thread count, for this trial only."""
    monkeypatch.setenv("KMP_BLOCKTIME", "0")
    before = torch.get_num_threads()
    want = 1 if before > 1 else 2
    res = run_trial(cfg(env={"OMP_NUM_THREADS": str(want)}, measure={"ceiling_seconds": 0}), cache_dir=tmp_path)
    assert res.environment.variables["KMP_BLOCKTIME"] == "0"
    assert res.environment.torch_threads == want and torch.get_num_threads() == before


def test_a_complete_trial_has_both_ceilings_and_a_verdict(tmp_path):
    res = run_trial(cfg(), cache_dir=tmp_path, clock=TickingClock(0.01))
    for key in ("compute_ceiling", "input_ceiling", "of_compute_ceiling", "of_input_ceiling"):
        assert res.value(key) is not None and res.value(key) > 0, (key, res.get("ceiling_skipped"))
    assert res.value("of_compute_ceiling") == pytest.approx(res.throughput / res.value("compute_ceiling"))
    assert res.get("bound") in ("input-bound", "compute-bound", "overhead-bound")
    assert res.get("headroom").startswith(res.get("bound") + " at ")


def test_ceilings_come_from_the_study_cache_when_measured_before(tmp_path):
    from tuner.measure.ceiling import CeilingCache

    cache = CeilingCache(tmp_path / "ceilings.json")
    first = run_trial(cfg(), cache_dir=tmp_path, ceilings=cache, clock=TickingClock(0.01))
    stored = sorted(v["value"] for v in __import__("json").loads(cache.path.read_text()).values())
    assert stored == sorted([first.value("compute_ceiling"), first.value("input_ceiling")])
    # A second trial with other loader knobs reuses the compute ceiling and measures its own input ceiling.
    second = run_trial(cfg(params={"num_workers": 1}), cache_dir=tmp_path, ceilings=cache, clock=TickingClock(0.01))
    assert second.value("compute_ceiling") == first.value("compute_ceiling")
    assert second.value("input_ceiling") is not None
    assert len(__import__("json").loads(cache.path.read_text())) == 3


def test_ceilings_can_be_switched_off_and_a_failed_trial_has_none(tmp_path, monkeypatch):
    off = run_trial(cfg(measure={"ceiling_seconds": 0}), cache_dir=tmp_path)
    assert off.complete and off.get("compute_ceiling") is None and off.get("headroom") is None
    monkeypatch.setattr(PhaseStep, "__call__", lambda self, b: (_ for _ in ()).throw(torch.OutOfMemoryError("x")))
    oom = run_trial(cfg(), cache_dir=tmp_path)
    assert oom.state == "oom" and oom.get("compute_ceiling") is None


def test_a_search_trial_leaves_its_ceilings_to_whoever_reads_its_verdict(tmp_path):
    from tuner.analysis import NOT_MEASURED

    res = run_trial(cfg(), cache_dir=tmp_path, measure_ceilings=False)
    assert res.complete and res.get("compute_ceiling") is None and res.get("input_ceiling") is None
    assert res.get("ceiling_skipped") == NOT_MEASURED and res.get("ceiling_seconds") is None


def test_a_trials_ceiling_reading_of_a_steady_rate_ends_before_its_deadline(tmp_path):
    """A trial's ceilings (the confirmation re-runs', `tuner train`'s) end once their rate is stable, as the probes'
    readings do: on a steady rate (a clock that ticks alike each read) far less than two full deadlines."""
    res = run_trial(cfg(measure={"ceiling_seconds": 4.0}), cache_dir=tmp_path, clock=TickingClock(0.01))
    spent = res.value("ceiling_seconds")
    assert res.value("compute_ceiling") and res.value("input_ceiling")
    assert spent is not None and spent < 0.5 * 2 * 4.0  # both ceilings, a 4 s deadline each
