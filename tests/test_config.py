import pytest

from tuner.config import Params, load_config, parse_config
from tuner.errors import ConfigError


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_example_config_from_the_docs_loads(tmp_path):
    cfg = load_config(write(tmp_path, """
workload: gan
dataset: digits
budget: {seconds: 20}
params: {batch_size: 64, accumulation_steps: 1, num_workers: 0, precision: fp32, beta1: 0.5, beta2: 0.999}
"""))
    assert cfg.workload == "gan" and cfg.budget.seconds == 20 and cfg.params.batch_size == 64
    assert cfg.params.effective_batch == 64


@pytest.mark.parametrize("text, key", [
    ("workload: gan\nparams: {batch_sise: 3}\n", "params.batch_sise"),
    ("workload: gan\nparams: {batch_size: many}\n", "params.batch_size"),
    ("workload: gan\nparams: {batch_size: 0}\n", "params.batch_size"),
    ("workload: ''\n", "workload"),
    ("workload_options: [1, 2]\n", "workload_options"),
    ("image_size: 64\n", "image_size"),
    ("params: {precision: fp8}\n", "params.precision"),
    ("params: {prefetch_factor: 4}\n", "params"),
    ("params: {persistent_workers: true}\n", "params"),
    ("budget: {seconds: 3, samples: 5}\n", "budget"),
    ("budget: {seconds: -1}\n", "budget.seconds"),
    ("colour: red\n", "colour"),
])
def test_bad_values_name_the_file_and_the_key(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: {key}:"), msg
    assert "\n" not in msg


def test_prefetch_without_workers_says_how_to_fix():
    with pytest.raises(ConfigError, match="prefetch_factor needs num_workers > 0"):
        parse_config({"params": {"prefetch_factor": 2}})


def test_malformed_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(write(tmp_path, "params: {batch_size: [\n"))
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


def test_prefetch_with_workers_is_fine():
    assert Params(num_workers=2, prefetch_factor=4, persistent_workers=True).prefetch_factor == 4


@pytest.mark.parametrize("seconds", [".inf", "-.inf", ".nan"])
def test_a_budget_that_is_not_finite_is_refused(tmp_path, seconds):
    with pytest.raises(ConfigError, match="budget.seconds: Input should be a finite number"):
        load_config(write(tmp_path, f"workload: cnn\nbudget: {{seconds: {seconds}}}\n"))


def test_the_budget_model_itself_refuses_inf_and_nan():
    from pydantic import ValidationError

    from tuner.config import Budget

    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            Budget(seconds=bad)


def test_an_lr_above_10_is_accepted_like_the_workloads_own(tmp_path):
    """word_language_model trains SGD at lr 20: params.lr takes it as the workload's hyperparameters do."""
    cfg = load_config(write(tmp_path, "workload: cnn\nparams: {batch_size: 20, lr: 20}\n"))
    assert cfg.params.lr == 20


@pytest.mark.parametrize("lr", [".inf", ".nan", "0", "-1"])
def test_an_lr_that_is_not_finite_and_positive_is_refused(tmp_path, lr):
    with pytest.raises(ConfigError, match="params.lr"):
        load_config(write(tmp_path, f"workload: cnn\nparams: {{lr: {lr}}}\n"))


def test_a_path_not_beside_the_config_is_read_from_the_current_folder_as_exports_name_it(tmp_path, monkeypatch):
    """A study run from the repository root exports `workload: examples/charlm.py:make` into reports/NAME/: that
    path is the current folder's, not the export's (the examples were refused when only the file's folder counted)."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "work.py").write_text("def make():\n    pass\n")
    (tmp_path / "reports" / "s").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write(tmp_path / "reports" / "s", "workload: examples/work.py:make\n"))
    assert cfg.workload == f"{tmp_path / 'examples' / 'work.py'}:make"
    monkeypatch.chdir(tmp_path / "reports")
    with pytest.raises(ConfigError, match="no such file in the file's folder .* or the current one"):
        load_config(write(tmp_path / "reports" / "s", "workload: examples/work.py:make\n"))


def test_a_relative_workload_path_is_read_from_the_config_files_folder(tmp_path, monkeypatch):
    """Only a relative file path moves: a built-in, an importable `package.module:make` and an absolute path are
    kept as written (the module is found on sys.path as before, not beside the config)."""
    folder = tmp_path / "exports"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "work.py").write_text("def make():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    absolute = f"{folder / 'sub' / 'work.py'}:make"
    for given, read in [("sub/work.py:make", absolute), ("./sub/work.py:make", absolute), (absolute, absolute),
                        ("cnn", "cnn"), ("mypackage.models:make", "mypackage.models:make")]:
        assert load_config(write(folder, f"workload: {given!r}\n")).workload == read, given


@pytest.mark.parametrize("data, said", [
    ({"options": {}}, "r.yaml: options: unknown key; did you mean workload_options?"),
    ({"budget": {"secs": 3}}, "r.yaml: budget.secs: unknown key; did you mean seconds?"),
    ({"measure": {"windowz": 3}}, "r.yaml: measure.windowz: unknown key; did you mean windows?"),
    ({"params": {"omp_wait": "active"}}, "r.yaml: params.omp_wait: unknown key; did you mean omp_wait_policy?"),
    ({"quality": {"zzz": 1}}, "r.yaml: quality.zzz: unknown key (known keys: enabled,"),
])
def test_an_unknown_key_names_the_key_it_was_probably_meant_to_be_or_the_known_ones(data, said):
    """A misspelt key is the commonest mistake in a hand-written config: the line says what to write instead."""
    with pytest.raises(ConfigError) as err:
        parse_config(data, "r.yaml")
    assert str(err.value).startswith(said), str(err.value)
    assert "\n" not in str(err.value)
