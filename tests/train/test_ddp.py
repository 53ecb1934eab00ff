"""DDP trials on the CPU: two gloo ranks in forked processes (no Ray), a seconds budget, the GAN with
accumulation 2. What only GPUs can confirm: NCCL, one GPU per rank, and the throughput scaling."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest
import torch

BUDGET_S = 2.0


def _rank_main(rank: int, world: int, folder: str) -> None:
    import torch.distributed as dist

    import tuner.train.trial as trial_mod
    from tuner.config import parse_config
    from tuner.train import run_trial
    from tuner.train.step import PhaseStep

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"file://{folder}/store")
    out: dict = {"rank": rank}
    original_step = PhaseStep.__call__

    def slow_on_rank_1(self, batches):  # ranks that would end their windows at different steps on their own
        if rank == 1:
            time.sleep(0.004)
        return original_step(self, batches)

    PhaseStep.__call__ = slow_on_rank_1
    from tests.helpers.fakes import TickingClock

    # Time in clock reads (the ceilings' deadlines hold their steps at any load), and rank 1 with a clock of its
    # own that runs three times faster: left to itself, this rank would end every window early.
    clock = TickingClock(0.001 if rank == 0 else 0.003)
    original_release = trial_mod._Run.release

    def capture(self, collect):
        models = self.models or {}
        out["params"] = {k: torch.cat([p.detach().flatten() for p in m.parameters()]).tolist()[:200]
                         for k, m in models.items()}
        out["latent_draw"] = torch.randn(3).tolist()  # the rank's own stream after training
        return original_release(self, collect)

    trial_mod._Run.release = capture
    cfg = parse_config({"workload": "gan", "dataset": "synthetic", "workload_options": {"image_size": 16, "width": 8},
                        "budget": {"seconds": BUDGET_S}, "measure": {"warmup_steps": 1, "windows": 3, "window_min_steps": 1},
                        "params": {"batch_size": 8, "accumulation_steps": 2, "device": "cpu"},
                        "quality": {"enabled": False}})
    result = run_trial(cfg, cache_dir=Path(folder) / "cache", clock=clock)
    out.update(state=result.state, error=result.error, steps=result.get("steps"), samples=result.get("samples"),
               windows=len(result.windows), train_seconds=result.get("train_seconds"),
               ceilings=[result.get("compute_ceiling"), result.get("input_ceiling")],
               ceiling_skipped=result.get("ceiling_skipped"))
    Path(folder, f"rank{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built in")
def test_two_gloo_ranks_end_together_with_equal_replicas_and_their_own_noise(tmp_path):
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_rank_main, args=(r, 2, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)  # a rank waiting on an all-reduce the other never makes would hang here
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
    assert not hung, "a rank did not finish: the ranks disagreed on when to stop"
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["state"] == r1["state"] == "complete", (r0["error"], r1["error"])
    assert r0["steps"] == r1["steps"] and r0["windows"] == r1["windows"] == 3  # the same steps on both ranks
    assert r0["samples"] == r1["samples"] and r0["samples"] >= 2 * 8 * 2 * r0["steps"] // 2
    assert r0["train_seconds"] < 10 * BUDGET_S  # it ended: nowhere near a process-group timeout
    for name in ("g", "d"):  # DDP kept the replicas equal, G included, with accumulation 2
        assert torch.allclose(torch.tensor(r0["params"][name]), torch.tensor(r1["params"][name]))
    assert r0["latent_draw"] != r1["latent_draw"]  # each rank draws its own latents: no duplicated work
    # both ceilings, measured by both ranks in step (the compute ceiling's steps all-reduce like training's)
    assert all(c and c > 0 for c in r0["ceilings"] + r1["ceilings"]), (r0["ceiling_skipped"], r1["ceiling_skipped"])
