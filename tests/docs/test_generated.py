"""The reference pages a user looks keys up in are generated from the code (docs/hooks.py), so they cannot drift:
files.md's metrics table from tuner/study/metrics.py, config.md's keys from the config models."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.helpers.docpages import REPO


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(markdown: str) -> set[str]:
    return set(re.findall(r"(?m)^\| `([^`]+)` \|", markdown))


def test_files_page_lists_every_metric_a_trial_records():
    from tuner.study.metrics import METRICS

    source = (REPO / "docs" / "reference" / "files.md").read_text()
    assert "<!-- generated: metrics -->" in source
    section = source.split("### Metrics", 1)[1].split("\n## ", 1)[0]
    assert not _rows(section), "files.md's metrics table is written by hand again: keep the generated marker only"
    page = _hooks().expand(source)
    missing = {m.key for m in METRICS} - _rows(page)
    assert not missing, f"files.md lacks metrics {sorted(missing)}"
    for key in ("goodput", "efficiency", "noise_scale", "estimated_time_to_target"):  # the ones it once missed
        assert key in _rows(page)


def test_a_new_metric_lands_on_the_page(monkeypatch):
    import tuner.study.metrics as metrics

    planted = metrics.Metric("planted_metric", "planted", "a metric added to the code only")
    monkeypatch.setattr(metrics, "METRICS", (*metrics.METRICS, planted))
    page = _hooks().expand((REPO / "docs" / "reference" / "files.md").read_text())
    assert "| `planted_metric` | planted | a metric added to the code only |" in page


@pytest.mark.parametrize("part", ["top", "params", "budget", "measure", "quality", "target"])
def test_config_page_lists_every_key_of_each_part(part):
    import tuner.config as config

    hooks = _hooks()
    source = (REPO / "docs" / "reference" / "config.md").read_text()
    assert f"<!-- generated: config-{part} -->" in source
    table = hooks.config_table(part)
    model = getattr(config, hooks.CONFIG_PARTS[part])
    assert _rows(table) == set(model.model_fields)
    for name, field in model.model_fields.items():  # what a key is: said in the code, not left blank
        assert field.description, f"tuner.config.{model.__name__}.{name} has no description for config.md"


def test_config_page_has_no_hand_written_key_table_and_shows_the_target_key():
    source = (REPO / "docs" / "reference" / "config.md").read_text()
    assert "| key |" not in source, "config.md's key tables are generated: use <!-- generated: config-PART -->"
    page = _hooks().expand(source)
    assert "| `target` | none |" in page and "| `eval_every_samples` | required |" in page
    assert "| `omp_wait_policy` | `default` | `default`, `PASSIVE`, `ACTIVE` |" in page
    assert "| `malloc` | `default` | `default`, `retain` |" in page
