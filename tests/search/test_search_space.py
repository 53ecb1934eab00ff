"""Search space files: the bundled ones, the conditionals, and errors that name the file and the key."""

from __future__ import annotations

import json
import re

import optuna
import pytest

from tuner.cli import main
from tuner.errors import ConfigError
from tuner.space import list_spaces, load_space, parse_space, space_names
from tuner.study import Objective

GOOD = """
description: a tiny space
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 128}, trials: 3}
objectives:
  gan: [{metric: throughput, direction: max}, {metric: fid, direction: min}]
  cnn: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
params:
  batch_size: {type: categorical, choices: [16, 32]}
  num_workers: {type: int, low: 0, high: 2}
  prefetch_factor: {type: int, low: 1, high: 4, when: {num_workers: ">0"}}
  beta1: {type: float, low: 0.1, high: 0.9}
  lr: 0.001
"""


def write(tmp_path, text, name="space.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bundled_spaces_load_and_amp_loader_searches_the_issue_knobs():
    assert {"amp_loader", "optimizer", "loader"} <= set(space_names())
    assert all(s.description for s in list_spaces())
    amp = load_space("amp_loader")
    assert amp.searched == ["batch_size", "accumulation_steps", "num_workers", "prefetch_factor",
                            "persistent_workers", "pin_memory", "threads", "omp_wait_policy", "malloc", "precision",
                            "tf32", "channels_last", "cudnn_benchmark", "optimizer_impl", "beta1", "beta2"]
    fid = Objective(metric="fid", direction="min")
    assert [(o.metric, o.direction) for o in amp.objectives_for("gan", quality=fid)] == \
        [("throughput", "maximize"), ("fid", "minimize")]
    with pytest.raises(ConfigError, match="'quality' stands for the workload's quality objective"):
        amp.objectives_for("mine.py:make", quality=None)
    loss = Objective(metric="loss", direction="min")
    assert [o.metric for o in load_space("optimizer").objectives_for("cnn", quality=loss)] == ["loss", "throughput"]


CPU_TRIAL = {"cpus": 2, "gpus": 0, "device": "cpu", "precisions": ["fp32"], "tf32_available": False}
H100_TRIAL = {"cpus": 16, "gpus": 1, "device": "cuda (H100)", "precisions": ["fp32", "fp16", "bf16"],
              "tf32_available": True}
T4_TRIAL = {"cpus": 8, "gpus": 1, "device": "cuda (T4)", "precisions": ["fp32", "fp16"], "tf32_available": False}


def draws(space, context, n=150, seed=1):
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        trial = study.ask()
        out.append(space.sample(trial, context))
        study.tell(trial, [1.0, 1.0])
    return out


@pytest.mark.parametrize("context", [CPU_TRIAL, H100_TRIAL, T4_TRIAL], ids=["cpu", "h100", "t4"])
def test_sampled_configs_are_always_valid_and_conditionals_hold(context):
    """Every draw becomes a validated TrialConfig: prefetch/persistent only with workers, pinning only with a GPU,
    workers up to the trial's CPUs, only native precisions, TF32 only for fp32 on a GPU that has it."""
    space = load_space("amp_loader")
    seen_workers, seen_precisions = set(), set()
    for params in draws(space, context):
        cfg = space.trial_config(params, {"workload": "gan", "dataset": "digits", "budget": {"seconds": 1}})
        seen_workers.add(cfg.params.num_workers)
        seen_precisions.add(cfg.params.precision)
        if cfg.params.num_workers == 0:
            assert "prefetch_factor" not in params and "persistent_workers" not in params
        assert ("pin_memory" in params) == (context["gpus"] > 0)
        assert ("tf32" in params) == (context["tf32_available"] and params["precision"] == "fp32")
    assert seen_workers == set(range(context["cpus"] + 1))  # the bundled space scales with the trial's CPUs
    assert seen_precisions == set(context["precisions"])


def test_the_loader_space_scales_with_the_trials_cpus():
    loader = load_space("loader")
    assert max(p["num_workers"] for p in draws(loader, CPU_TRIAL, n=40)) == 2
    assert max(p["num_workers"] for p in draws(loader, H100_TRIAL, n=80)) > 8  # the H100 node's best had 12


def test_baseline_point_and_the_optuna_distribution_agree_on_a_single_native_choice():
    """On a CPU `precision` is left with fp32 alone: a one-choice categorical, which Optuna samples as a fixed
    value; the baseline (trial 0) uses it too, and asks for no TF32."""
    space = load_space("amp_loader").resolve(CPU_TRIAL)
    assert space.params["precision"].choices == ["fp32"] and space.params["precision"].single
    base = space.baseline_point(CPU_TRIAL, own={"beta1": 0.5, "beta2": 0.999})  # the workload's own betas
    assert base["precision"] == "fp32" and base["num_workers"] == 0 and "tf32" not in base
    # the CPU's threading as the user has it: torch's own thread count (the trial's CPUs), no wait policy set
    assert base["threads"] == CPU_TRIAL["cpus"] and base["omp_wait_policy"] == "default"
    assert base["malloc"] == "default"  # glibc's allocator as the user has it
    assert base["beta1"] == 0.5 and base["beta2"] == 0.999
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.enqueue_trial(base)
    trial = study.ask()
    assert space.sample(trial, CPU_TRIAL) == base
    assert trial.distributions["precision"].single()
    gpu = load_space("amp_loader").resolve(H100_TRIAL)
    assert gpu.baseline_point(H100_TRIAL)["tf32"] is False  # tuner's default: TF32 off, as a trial of its own
    # what reports show a column for: never pinning or TF32 in a CPU study
    assert {"pin_memory", "tf32"} - set(space.reachable(CPU_TRIAL)) == {"pin_memory", "tf32"}
    assert {"pin_memory", "tf32"} <= set(gpu.reachable(H100_TRIAL)) and "tf32" not in gpu.reachable(T4_TRIAL)


def test_resource_expressions_resolve_round_down_and_clamp_to_the_params_limits(tmp_path):
    space = load_space(str(write(tmp_path, GOOD.replace(
        "num_workers: {type: int, low: 0, high: 2}",
        'num_workers: {type: int, low: "min(1, gpus)", high: 4 * cpus / 3}'))))  # a comma needs quotes in YAML
    assert space.params["num_workers"].describe() == "int [min(1, gpus), 4 * cpus / 3]"
    resolved = space.resolve({"cpus": 2, "gpus": 0})
    assert (resolved.params["num_workers"].low, resolved.params["num_workers"].high) == (0, 2)  # 8/3 rounds down
    resolved = space.resolve({"cpus": 128, "gpus": 2})
    assert (resolved.params["num_workers"].low, resolved.params["num_workers"].high) == (1, 128)  # 170 > limit
    assert space.definition()["params"]["num_workers"]["high"] == "4 * cpus / 3"  # study.json keeps the text


def test_an_empty_domain_for_the_studys_trials_is_refused_naming_the_param(tmp_path):
    space = load_space(str(write(tmp_path, GOOD.replace(
        "num_workers: {type: int, low: 0, high: 2}", "num_workers: {type: int, low: 4, high: cpus - 1}"))))
    assert space.resolve({"cpus": 8, "gpus": 0}).params["num_workers"].high == 7
    with pytest.raises(ConfigError) as err:
        space.resolve({"cpus": 2, "gpus": 0})
    msg = str(err.value)
    assert "params.num_workers: low (4) is greater than high (cpus - 1 = 1)" in msg and "cpus = 2" in msg
    assert "--cpus-per-trial" in msg and "\n" not in msg
    never = GOOD.replace("num_workers: {type: int, low: 0, high: 2}",
                         "num_workers: {type: int, low: gpus + 1, high: gpus}")
    with pytest.raises(ConfigError, match=r"params.num_workers: low \(gpus \+ 1\) is greater than high \(gpus\) "
                                          r"for every plausible trial \(gpus 0-8\)"):
        load_space(str(write(tmp_path, never, "never.yaml")))


@pytest.mark.parametrize("bound, expected", [
    ("cpus +", "params.num_workers.high: 'cpus +' is not an expression"),
    ("ram", "unknown name 'ram'"),
    ("__import__('os').system('true')", "is not allowed"),
    ("cpus ** 2", "** is not allowed"),
    ("cpus / gpus", "params.num_workers.high: cpus / gpus divides by zero for trials with cpus = 1, gpus = 0"),
    ("true", "not a bool"),
])
def test_bad_expressions_are_refused_at_load_naming_the_key(tmp_path, bound, expected):
    path = write(tmp_path, GOOD.replace("num_workers: {type: int, low: 0, high: 2}",
                                        f"num_workers: {{type: int, low: 0, high: {bound}}}"))
    with pytest.raises(ConfigError) as err:
        load_space(str(path))
    assert str(path) in str(err.value) and expected in str(err.value), str(err.value)


def test_an_expression_whose_values_the_param_cannot_take_is_refused_at_load(tmp_path):
    path = write(tmp_path, GOOD.replace("beta1: {type: float, low: 0.1, high: 0.9}",
                                        "beta1: {type: float, low: 0.1, high: cpus / 4}"))
    with pytest.raises(ConfigError, match=r"params.beta1.high: cpus / 4 is 1.0 for trials with cpus = 4, "
                                          r"which is not valid for beta1"):
        load_space(str(path))


def test_native_and_tf32_are_checked_at_load(tmp_path):
    with pytest.raises(ConfigError, match="params.batch_size.native: only precision has native choices"):
        load_space(str(write(tmp_path, GOOD.replace("choices: [16, 32]}", "choices: [16, 32], native: true}"))))
    with pytest.raises(ConfigError, match="params.tf32.when: add tf32_available: true"):
        load_space(str(write(tmp_path, GOOD + "  tf32: {type: bool}\n")))
    load_space(str(write(tmp_path, GOOD + "  tf32: {type: bool, when: {tf32_available: true}}\n")))


def test_a_space_left_with_nothing_to_search_on_this_device_is_refused(tmp_path):
    path = write(tmp_path, """
objectives: [{metric: throughput, direction: max}]
params:
  precision: {type: categorical, choices: [fp32, bf16], native: true}
""")
    space = load_space(str(path))
    with pytest.raises(ConfigError, match=r"nothing left to search on cpu \(precision = fp32\)"):
        space.resolve(CPU_TRIAL)
    with pytest.raises(ConfigError, match=r"nothing left to search on cuda \(T4\)"):
        space.resolve(T4_TRIAL)  # emulated bf16 is not native
    assert space.resolve(H100_TRIAL).params["precision"].choices == ["fp32", "bf16"]


def test_a_users_yaml_path_works_like_a_name(tmp_path):
    space = load_space(str(write(tmp_path, GOOD, "mine.yaml")))
    assert space.name == "mine" and space.searched == ["batch_size", "num_workers", "prefetch_factor", "beta1"]
    assert space.fixed_values() == {"lr": 0.001}
    assert space.defaults.workload == "cnn" and space.defaults.budget.samples == 128 and space.defaults.trials == 3


@pytest.mark.parametrize("change, key", [
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_sise: {type: int, low: 1, high: 2}"), "params.batch_sise"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: float, low: 0.9, high: 0.1}"), "params.beta1"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: gaussian, low: 0.1, high: 0.9}"), "params.beta1.type"),
    (("beta1: {type: float, low: 0.1, high: 0.9}", "beta1: {type: float, low: 0.1, high: 1.5}"), "params.beta1"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {type: categorical}"), "params.batch_size"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {type: int, low: 0, high: 8}"), "params.batch_size"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {low: 1, high: 8}"), "params.batch_size"),
    (("when: {num_workers: \">0\"}", "when: {beta1: \">0\"}"), "params.prefetch_factor.when.beta1"),
    (("{metric: loss, direction: min}", "{metric: val_elbo}"), "objectives.cnn.1: give a direction"),
    (("{metric: loss, direction: min}", "{metric: samples, direction: max}"), "objectives.cnn.1.metric"),
    (("direction: min}]\nparams", "direction: sideways}]\nparams"), "objectives.cnn.1.direction"),
    (("trials: 3", "trials: 0"), "defaults.trials"),
    (("trials: 3", "trails: 3"), "defaults.trails: unknown key; did you mean trials?"),
    (("batch_size: {type: categorical, choices: [16, 32]}", "batch_size: {type: categorical, choises: [16, 32]}"),
     "params.batch_size.choises: unknown key; did you mean choices?"),
    (("params:", "zzz: 1\nparams:"), "zzz: unknown key (known keys: description, defaults, objectives, params, trial,"),
])
def test_space_errors_name_the_file_and_the_key(tmp_path, change, key):
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_space(str(path))
    assert str(path) in str(err.value) and key in str(err.value), str(err.value)


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "params:\n  batch_size: {type: int, low: 1\n")
    with pytest.raises(ConfigError, match=r"space.yaml: not valid YAML at line \d"):
        load_space(str(path))


def test_parse_space_refuses_a_space_with_nothing_to_search():
    with pytest.raises(ConfigError, match="nothing to search"):
        parse_space({"objectives": [{"metric": "throughput", "direction": "max"}], "params": {"lr": 0.01}},
                    source="x.yaml", name="x")


def test_cli_spaces_lists_and_shows(capsys):
    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    for name in ("amp_loader", "optimizer", "loader"):
        assert name in out
    assert main(["spaces", "show", "amp_loader"]) == 0
    out = capsys.readouterr().out
    assert "prefetch_factor" in out and "when num_workers > 0" in out
    assert "num_workers          int [0, cpus]" in out
    assert "(high cpus is clamped to the limit of num_workers in the config (at most 128))" in out
    assert "objectives: throughput (max), quality (the workload's: fid (min) for gan; another --workload " \
        "brings its own)" in out


USER_WORKLOAD = """
import tuner


def make():
    print("building my model")  # a constructor that prints: stdout stays the space
    return tuner.Workload(models={"m": lambda: None}, datasets=lambda: ([], []), loss=lambda models, batch: 0,
                          evaluate=lambda models, val: {"val_bpc": 1.0}, quality=("val_bpc", "min"))
"""


def test_spaces_show_names_the_quality_metric_of_a_user_spaces_workload(tmp_path, capsys):
    """A user's space whose workload is their own: `metric: quality` is named as that workload declares it
    (Workload.quality), not as "fid for gan, loss for cnn"; a workload that cannot be loaded says so."""
    (tmp_path / "mine.py").write_text(USER_WORKLOAD)
    space = tmp_path / "mine.yaml"
    space.write_text("description: mine\ndefaults: {workload: mine.py:make, budget: {seconds: 10}, trials: 4}\n"
                     "objectives: [{metric: quality}, {metric: throughput, direction: max}]\n"
                     "params:\n  batch_size: {type: categorical, choices: [16, 32]}\n")
    assert main(["spaces", "show", str(space)]) == 0
    out, err = capsys.readouterr()
    assert f"objectives: quality (the workload's: val_bpc (min) for {tmp_path / 'mine.py'}:make; another " \
        "--workload brings its own), throughput (max)" in out
    assert "fid" not in out and "building my model" in err and "building my model" not in out
    assert main(["spaces", "show", str(space), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workload_quality"] == {"default": {"workload": f"{tmp_path / 'mine.py'}:make",
                                                   "metric": "val_bpc", "direction": "minimize"}}
    (tmp_path / "broken.py").write_text("raise ImportError('no such thing')\n")
    space.write_text(space.read_text().replace("mine.py", "broken.py"))
    assert main(["spaces", "show", str(space)]) == 0
    out = capsys.readouterr().out
    assert "objectives: quality (the workload's Workload.quality; " in out and "could not be loaded here" in out


def test_cli_spaces_show_unknown_exits_2(capsys):
    assert main(["spaces", "show", "no_such_space"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown space 'no_such_space'" in err[0] and "amp_loader" in err[0]


def test_compile_modes_that_need_cuda_need_a_gpus_condition_and_the_opt_in_space_searches_compile(tmp_path):
    with pytest.raises(ConfigError, match="params.compile.when: reduce-overhead capture CUDA graphs"):
        load_space(str(write(tmp_path, GOOD + '  compile: {type: categorical, choices: ["off", reduce-overhead]}\n')))
    load_space(str(write(tmp_path, GOOD + '  compile: {type: categorical, choices: ["off", reduce-overhead], '
                                          'when: {gpus: ">0"}}\n')))
    assert "compile" not in load_space("amp_loader").params  # compile costs minutes on a CPU: opt-in only
    assert load_space("amp_loader_compile").params["compile"].choices == ["off", "default"]


@pytest.mark.parametrize(("param", "when", "never"), [
    ("prefetch_factor", '{num_workers: ">abc"}', "num_workers > abc can never hold (num_workers is a whole number "
                                                 "from 0 to 2)"),
    ("prefetch_factor", '{num_workers: ">2"}', "num_workers > 2 can never hold"),
    ("prefetch_factor", "{num_workers: [5, 6]}", "num_workers in [5, 6] can never hold"),
    ("prefetch_factor", "{precision: fp64}", "precision == fp64 can never hold (precision is one of 'fp32', 'bf16')"),
    ("prefetch_factor", '{gpus: ">x"}', "gpus > x can never hold"),
    ("prefetch_factor", "{tf32_available: 1.5}", "tf32_available == 1.5 can never hold"),
])
def test_a_condition_that_can_never_hold_is_refused_naming_the_param(tmp_path, param, when, never):
    """`when: {num_workers: ">abc"}` or `{precision: fp64}` was accepted: the param was never searched and nothing
    said so."""
    text = GOOD.replace('  prefetch_factor: {type: int, low: 1, high: 4, when: {num_workers: ">0"}}',
                        "  precision: {type: categorical, choices: [fp32, bf16]}\n"
                        f"  prefetch_factor: {{type: int, low: 1, high: 4, when: {when}}}")
    with pytest.raises(ConfigError, match=rf"params\.{param}\.when\.\w+: {re.escape(never)}"):
        load_space(str(write(tmp_path, text)))
    for fine in ('{num_workers: ">1"}', "{num_workers: [2, 6]}", "{precision: bf16}", '{gpus: ">0"}'):
        load_space(str(write(tmp_path, text.replace(f"when: {when}", f"when: {fine}"))))
