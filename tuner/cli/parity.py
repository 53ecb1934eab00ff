"""`tuner parity`: does a numerics knob (bf16 / fp16 autocast, TF32, torch.compile) change what a config learns?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.cli.app import (Debug, Format, FormatOption, app, apply_run_env, note, print_json, stdout_console,
                           user_output)
from tuner.errors import ConfigError


def _knob_sets(given: list[str], cfg: object) -> list[dict[str, object]]:
    """--knob KEY=VALUE (each a set of its own), or the config's own numerics knobs together."""
    import yaml

    from tuner.files import YamlRefused, safe_yaml
    from tuner.knobs import numerics_knobs
    from tuner.parity import knob_settings

    if not given:
        own = knob_settings(cfg)
        if not own:
            raise ConfigError("the config trains in fp32 with no numerics knob on, so there is nothing to compare "
                              "with fp32; name one, e.g. --knob precision=bf16 or --knob compile=default")
        return [own]
    sets = []
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in numerics_knobs():
            raise ConfigError(f"--knob {item!r}: give KEY=VALUE with KEY one of {', '.join(numerics_knobs())} "
                              f"(the knobs that change only rounding), e.g. --knob precision=bf16")
        try:  # the YAML every other option is read with (tuner.files.safe_yaml): 1e-6 a number, `[` refused
            sets.append({key.strip(): safe_yaml(value)})
        except (yaml.YAMLError, YamlRefused) as err:
            raise ConfigError(f"--knob {item!r}: its value is not a YAML scalar ({type(err).__name__}), e.g. "
                              f"--knob precision=bf16") from None
    return sets


@app.command()
def parity(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config (the format `tuner export` writes).")],
    knob: Annotated[Optional[list[str]], typer.Option(
        "--knob", help="A numerics knob to judge, KEY=VALUE (precision=bf16, tf32=true, compile=default); repeat "
                       "for several, each judged on its own. Default: the config's own numerics knobs together.")] = None,
    steps: Annotated[int, typer.Option(min=8, help="Optimizer steps per run.")] = 200,
    reports_dir: Annotated[Path, typer.Option(help="Where caches (datasets) go.")] = Path("reports"),
    format: FormatOption = Format.table,
    debug: Debug = False,
) -> None:
    """Train the same steps from the same seed in fp32 and under a numerics knob, beside fp32 with other seeds:
    the knob is within seed noise, drifts (by how much, from which step) or diverged."""
    from tuner.config import load_config

    cfg = load_config(config)
    apply_run_env(cfg.env)  # the environment its trial ran under, before torch loads (as tuner train does)
    sets = _knob_sets(list(knob or []), cfg)
    from tuner.parity import check_arms, check_parity

    with user_output():
        check_arms(cfg, sets, reports_dir / ".cache")  # each arm valid here, before anything trains
    as_json = format is Format.json
    with user_output():
        verdicts = check_parity(cfg, sets, steps, reports_dir / ".cache", progress=None if as_json else note)
    if as_json:
        print_json({"steps": steps, "verdicts": [{"knob": v.knob, "state": v.state, "gap": v.gap,
                                                  "seed_gap": v.seed_gap, "from_step": v.from_step,
                                                  "text": v.text()} for v in verdicts]})
        return
    for v in verdicts:
        stdout_console().print(v.text(), markup=False, highlight=False)
