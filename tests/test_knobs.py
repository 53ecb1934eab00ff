"""The role table (tuner.knobs) is the one source: every knob is in it, the ceiling cache keys, the probes' knobs,
the refusals on a CPU and the README's table follow from it."""

import ast
from pathlib import Path
from typing import get_args

import pytest
import torch
from pydantic import ValidationError

from tests.helpers.fakes import FakeCudaDevice
from tuner.config import Params, TrialConfig
from tuner.device import Device
from tuner.errors import DeviceError
from tuner.knobs import CEILINGS, KNOBS, check_device, ceiling_knobs, dropped_here, parity_probed, probed, readme_table
from tuner.search._loader_probe import LOADER_KNOBS
from tuner.train.ceilings import ceiling_keys

CPU = Device("cpu", torch.device("cpu"), "test cpu")


def other_value(name: str):
    """A valid value of `name` other than its default."""
    field = Params.model_fields[name]
    default = field.default
    if isinstance(default, bool):
        return not default
    choices = [a for arg in get_args(field.annotation) for a in (get_args(arg) or (arg,))]
    literals = [c for c in choices if isinstance(c, str)]
    if literals:
        return next(c for c in literals if c != default)
    if int in choices or isinstance(default, int):
        return 2 if default != 2 else 3
    return 0.5


def config_with(name: str, value=None) -> TrialConfig:
    """A config whose loader has workers (so prefetch and persistence are valid), with `name` set."""
    params = {"num_workers": 2}
    if value is not None:
        params[name] = value
    return TrialConfig(workload="cnn", params=params)


def test_every_params_field_is_in_the_role_table():
    """A knob missing from the table would be silently left out of the ceiling keys, the probes and the export."""
    missing = set(Params.model_fields) - set(KNOBS)
    assert not missing, f"Params fields without an entry in tuner.knobs.KNOBS: {sorted(missing)}"
    assert set(KNOBS) <= set(Params.model_fields), "a table entry names no Params field"
    for k in KNOBS.values():
        assert k.role in ("learned", "numerics", "speed", "run") and set(k.moves) <= set(CEILINGS)
        if k.probe is not None:
            assert k.role in ("speed", "numerics") and k.probe in k.moves, \
                f"{k.name}: only a speed or numerics knob moving that ceiling is probed"
        assert k.spell(other_value(k.name)), k.name


@pytest.mark.parametrize("name", sorted(KNOBS))
def test_a_knob_that_moves_a_ceiling_never_shares_its_cached_ceiling(name):
    value = other_value(name)
    if name == "num_workers":
        value = 3
    a = ceiling_keys(config_with(name), CPU)
    b = ceiling_keys(config_with(name, value), CPU)
    for kind in CEILINGS:
        if kind in KNOBS[name].moves:
            assert a[kind] != b[kind], f"{name}={value!r} shares the cached {kind} ceiling of the default"
        else:
            assert a[kind] == b[kind], f"{name} does not move the {kind} ceiling but changes its key"


def test_the_new_speed_knobs_move_the_compute_ceiling_alone():
    assert {"channels_last", "cudnn_benchmark", "optimizer_impl"} <= set(ceiling_knobs("compute"))
    assert not {"channels_last", "cudnn_benchmark", "optimizer_impl"} & set(ceiling_knobs("input"))
    assert set(probed("compute")) == {"channels_last", "cudnn_benchmark", "optimizer_impl", "threads",
                                      "omp_wait_policy", "malloc"}
    assert set(parity_probed()) == {"precision", "tf32"}  # compile's compile time does not fit a probe
    assert LOADER_KNOBS == probed("input") == ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")


def test_the_cpu_threading_knobs_are_probed_speed_knobs_and_the_wait_policy_goes_through_the_environment():
    """Issue 58: the thread count and the OpenMP wait policy are speed knobs a study probes (not constants tuner
    sets): both move both ceilings' keys, the wait policy is applied through the environment before torch loads
    (probed in fresh processes), and the default sets nothing at all."""
    from tuner.knobs import env_knobs, knob, knob_env

    for name in ("threads", "omp_wait_policy"):
        k = knob(name)
        assert (k.role, k.probe, set(k.moves)) == ("speed", "compute", set(CEILINGS))
    assert env_knobs() == ("omp_wait_policy", "malloc")
    assert knob_env(Params()) == {}  # tuner's default: the user's environment, untouched
    assert knob_env(Params(omp_wait_policy="passive")) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert knob("omp_wait_policy").spell("ACTIVE").startswith("OMP_WAIT_POLICY=ACTIVE python train.py")
    assert "environment as you have it" in knob("omp_wait_policy").spell("default")
    assert knob("threads").spell(1).startswith("torch.set_num_threads(1)")
    with pytest.raises(ValueError):
        Params(omp_wait_policy="sometimes")


def test_malloc_retain_sets_both_glibc_thresholds_and_default_sets_nothing():
    """Issue 58: glibc's allocator is a probed speed knob applied through the environment. `retain` sets BOTH
    thresholds (the trim threshold alone pins the mmap threshold at 128 KiB: 40,000 faults a step instead of 6,000),
    `default` sets nothing; both variables are the knob's, so a process at its default has both unset."""
    from tuner.knobs import MALLOC_RETAIN, env_knobs, env_vars, knob, knob_env

    k = knob("malloc")
    assert (k.role, k.probe, set(k.moves)) == ("speed", "compute", set(CEILINGS))
    assert "malloc" in env_knobs()
    assert set(env_vars()) == {"OMP_WAIT_POLICY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}
    assert k.env_sets("default") == {} and knob_env(Params(malloc="default")) == {}
    retain = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}
    assert k.env_sets("retain") == retain == MALLOC_RETAIN
    assert knob_env(Params(malloc="retain", omp_wait_policy="PASSIVE")) == {"OMP_WAIT_POLICY": "PASSIVE", **retain}
    assert k.spell("retain").startswith("MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 python ")
    assert "before python starts" in k.spell("retain") and "as you have it" in k.spell("default")
    with pytest.raises(ValueError):
        Params(malloc="jemalloc")


def test_malloc_is_not_probed_without_glibc_and_a_config_with_retain_still_runs(monkeypatch):
    """Elsewhere (macOS, musl) the thresholds do nothing: the knob is said not probed, and setting them in a running
    process is skipped rather than refused."""
    import tuner.knobs as knobs

    assert knobs.env_acts("omp_wait_policy") is None
    monkeypatch.setattr(knobs, "glibc", lambda: False)
    assert "no glibc" in (knobs.env_acts("malloc") or "")
    assert knobs.apply_malloc(knobs.MALLOC_RETAIN) == []
    monkeypatch.setattr(knobs, "glibc", lambda: True)
    assert knobs.env_acts("malloc") is None


@pytest.mark.parametrize("name", ["pin_memory", "cudnn_benchmark"])
def test_cuda_only_knobs_are_refused_on_a_cpu_in_one_line_and_allowed_on_cuda(name):
    params = Params(**{name: True})
    with pytest.raises(DeviceError, match=f"^{name} needs a CUDA device; set {name}: false on the CPU$"):
        check_device(params, CPU)
    check_device(params, FakeCudaDevice())
    check_device(Params(), CPU)  # off: nothing to refuse
    assert dropped_here(name, cuda=False, tf32_available=False) == "no CUDA device"
    assert dropped_here(name, cuda=True, tf32_available=False) is None


def test_tf32_is_refused_without_ampere():
    with pytest.raises(DeviceError, match="tf32 needs a CUDA GPU of the Ampere generation or newer"):
        check_device(Params(tf32=True), CPU)
    check_device(Params(tf32=True), FakeCudaDevice())


def test_the_readme_holds_the_generated_knob_table():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert readme_table() in readme, "README's knob table is out of date: paste tuner.knobs.readme_table()"


def test_the_split_of_a_fixed_effective_batch_is_speed_only_without_batch_statistics():
    """Issue 40: a study that kept its effective batch shows batch_size's role by what the pre-flight found."""
    from tuner.knobs import role_text

    assert role_text("batch_size").startswith("what is learned")  # the README's table: the knob in general
    assert role_text("batch_size", batch_statistics=False).startswith("speed only")
    assert role_text("accumulation_steps", batch_statistics=True).startswith("what is learned")
    assert role_text("precision", batch_statistics=False) == role_text("precision")


def test_tf32_acts_only_beside_fp32_and_every_acts_with_names_a_knob():
    from tuner.knobs import KNOBS, acts

    assert acts("tf32", {"precision": "fp32"}) and acts("tf32", {})
    assert not acts("tf32", {"precision": "bf16"}) and not acts("tf32", {"precision": "fp16"})
    assert acts("channels_last", {"precision": "bf16"})
    for k in KNOBS.values():
        for other, value in k.acts_with:
            assert other in KNOBS and other != k.name
            assert value == getattr(Params(), other)  # what it acts with is the other knob's default


def test_the_export_spells_accumulation_of_one_as_no_accumulation():
    """A pick without accumulation read `loss / 1 per micro-batch; optimizer.step() every 1 micro-batches`."""
    from tuner.knobs import knob

    assert knob("accumulation_steps").spell(1) == "no accumulation: optimizer.step() after every micro-batch"
    assert knob("accumulation_steps").spell(4) == "loss / 4 per micro-batch; optimizer.step() every 4 micro-batches"


def test_every_params_default_and_its_knob_entry_agree():
    """Each knob's default and domain sit in its KNOBS entry beside its role and reason, and Params is built from
    them (issue 53 item 3): a default config runs on a CPU (its knobs need no CUDA), sets no environment, spells in
    plain PyTorch, and the precision domain is the one the dtype map knows."""
    from tuner.knobs import PRECISION_DTYPES, knob_env

    defaults = Params()
    check_device(defaults, CPU)  # a knob whose default needs CUDA would refuse every CPU run
    assert knob_env(defaults) == {}, "a knob applied through the environment sets nothing at its default"
    for k in KNOBS.values():
        default = Params.model_fields[k.name].default
        if "workers" in k.needs and not defaults.num_workers:
            assert default in (None, False), f"{k.name} needs workers, and the default loads without them"
        if k.heavier:
            assert isinstance(default, int) and not isinstance(default, bool), f"{k.name}: the pre-flight times its top"
        if default is not None:
            assert k.spell(default), f"{k.name}: its default has no plain-PyTorch line"
        for other, value in k.acts_with:
            Params(**{other: value})  # a value the other knob's domain holds
    precisions = [a for arg in get_args(Params.model_fields["precision"].annotation) for a in (get_args(arg) or (arg,))]
    assert set(precisions) == set(PRECISION_DTYPES)
    from tuner.device import dtype_of

    assert [str(dtype_of(p)) for p in precisions] == [PRECISION_DTYPES[p] for p in precisions]


def test_params_is_built_from_the_table_so_a_new_knob_is_one_entry():
    """The knob table is the one declaration (issue 53 item 3): Params' fields are the table's knobs, in its order,
    each with the entry's default and domain; a knob planted in a copy of the table is a field of the model built
    from it, with its default, its bounds and its coercion, and nothing else has to change."""
    from dataclasses import replace

    from tuner.config import params_model
    from tuner.knobs import Knob

    assert list(Params.model_fields) == list(KNOBS)
    for k in KNOBS.values():
        field = Params.model_fields[k.name]
        assert field.default == k.default and field.description == k.doc, k.name
    assert Params(compile=False).compile == "off" and Params(omp_wait_policy="passive").omp_wait_policy == "PASSIVE"

    planted = Knob("grad_clip", "learned", (), "torch.nn.utils.clip_grad_norm_(params, {value})", annotation=float,
                   default=1.0, domain=dict(gt=0, le=100), doc="gradient norm clip", coerce=lambda v: v * 2)
    model = params_model(KNOBS | {planted.name: planted})
    assert list(model.model_fields) == [*KNOBS, "grad_clip"]
    assert model().grad_clip == 1.0 and model(grad_clip=3).grad_clip == 6
    with pytest.raises(ValidationError):
        model(grad_clip=60)  # over its bound once coerced
    with pytest.raises(ValidationError):
        model(num_workers=0, prefetch_factor=2)  # Params' own rules hold for the built model too
    narrower = params_model(KNOBS | {"batch_size": replace(KNOBS["batch_size"], domain=dict(ge=1, le=8))})
    with pytest.raises(ValidationError):
        narrower(batch_size=9)


ROOT = Path(__file__).resolve().parents[1]


def precision_dtype_spellings(root: Path) -> list[str]:
    """`module:line` for each place under root/tuner that spells a reduced-precision dtype: a string naming one
    ("torch.bfloat16") or an attribute (torch.float16). Only the one precision -> dtype map (tuner.knobs) may."""
    found = []
    for path in sorted((root / "tuner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else \
                node.attr if isinstance(node, ast.Attribute) else ""
            if "float16" in text or text == "half":  # float16, bfloat16, torch.half
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_the_precision_map_has_one_definition(tmp_path):
    """The precision -> dtype map is written once, in tuner.knobs (issue 53 item 3): the device makes the dtype from
    it, the export and the knob lines print its names. A second map, planted, is found."""
    assert {f.split(":")[0] for f in precision_dtype_spellings(ROOT)} == {"tuner/knobs.py"}
    planted = tmp_path / "tuner" / "measure" / "flops.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('import torch\nDTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}\n'
                       'NAMES = {"bf16": "torch.bfloat16"}\n')
    assert precision_dtype_spellings(tmp_path) == ["tuner/measure/flops.py:2", "tuner/measure/flops.py:2",
                                                   "tuner/measure/flops.py:3"]


@pytest.mark.skipif(not __import__("tuner.knobs", fromlist=["glibc"]).glibc(), reason="glibc's malloc only")
def test_a_running_process_given_retain_sets_glibcs_thresholds_through_mallopt():
    """glibc read MALLOC_*_THRESHOLD_ at python's start, so `tuner train --config` (tuner.cli.app.apply_run_env,
    before torch loads) sets them through mallopt too: both accepted, in a process of its own; a config's env
    applied to a mapping that is not this process's environment sets nothing in the process."""
    import json
    import subprocess
    import sys

    code = ("import json, os, tuner.knobs as k; from tuner.cli.app import apply_run_env; seen = []; "
            "k.apply_malloc = lambda env, real=k.apply_malloc: seen.append(real(env)) or seen[-1]; "
            "apply_run_env(dict(k.MALLOC_RETAIN), env={}); apply_run_env(dict(k.MALLOC_RETAIN)); "
            "print(json.dumps([seen, os.environ.get('MALLOC_MMAP_THRESHOLD_')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seen, var = json.loads(out.strip().splitlines()[-1])
    assert seen == [["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"]] and var == "33554432"
