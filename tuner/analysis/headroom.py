"""How far a study's trials are from what their hardware allows, as its views read them: each record's bound (from
its ceilings, else its data-wait share), its verdict re-derived for a record that stored none, and the ceilings a
search trial did not measure itself, filled from the study's cache of the ones it did.

The verdict itself (`assess`, its thresholds and sentence) is a reading the trial stores with its figures
(tuner.study.readings), and the cache's keys are the ceilings' (tuner.measure.ceiling): both sit below this module,
so the producers that write them know nothing of the judge. Their names are re-exported here for the views.
"""

from __future__ import annotations

from typing import Any

from tuner.measure.ceiling import NOT_MEASURED, cache_key, ceiling_cache_keys
from tuner.study import (
    BOUND_EXPLANATION, COMPUTE_BOUND_AT, COMPUTE_BOUND_BELOW, INPUT_BOUND_ABOVE, INPUT_SHORT_OF, LOW_OF_PEAK, Bound,
    Headroom, assess, bound_label, finite, peak_clause, rate,
)

__all__ = ["BOUND_EXPLANATION", "COMPUTE_BOUND_AT", "COMPUTE_BOUND_BELOW", "Bound", "Headroom", "INPUT_BOUND_ABOVE",
           "INPUT_SHORT_OF", "LOW_OF_PEAK", "NOT_MEASURED", "assess", "bound_label", "cache_key", "ceiling_cache_keys",
           "fill_from_cache", "of_record", "peak_clause", "rate", "record_bound"]


def record_bound(record: Any) -> str:
    """A trial's bound: from its ceilings when it has them, else from its data-wait share; "" when unknown."""
    stored = record.get("bound")
    return stored if isinstance(stored, str) and stored else bound_label(record.get("data_wait"))


def of_record(record: Any) -> Headroom:
    """The verdict of a trial record or result (stored at training time, re-derived for older records)."""
    params = dict(getattr(record, "params", None) or {})
    config_params = ((getattr(record, "config", None) or {}).get("params") or {})
    params = {**config_params, **params}
    return assess(record.get("throughput"), record.get("compute_ceiling"), record.get("input_ceiling"),
                  params=params, data_wait=record.get("data_wait"), device=getattr(record, "device", "") or "",
                  of_peak=record.get("of_peak"))


# --- the study's ceiling cache (a study measures ceilings only for the trials whose verdict someone reads; every
# other trial that shares their knobs gets them from here; its keys are tuner.measure.ceiling's) ----------------

def fill_from_cache(records: list[Any], cache: dict[str, Any]) -> None:
    """Give each complete single-process record without ceilings the ones its knobs share with a trial that
    measured them (`cache`: the study's ceilings.json); one that then has both gets its verdict from them and loses
    its `ceiling_skipped` note, one that does not keeps the note (it says why)."""
    from tuner.config import TrialConfig

    if not cache:
        return
    for r in records:
        have = {k for k in ("compute", "input") if r.value(f"{k}_ceiling") is not None}
        if not r.complete or not r.config or len(have) == 2:
            continue
        try:
            cfg = TrialConfig.model_validate(r.config)
        except ValueError:
            continue
        if cfg.gpus > 1:  # DDP trials do not use the cache (every rank measures)
            continue
        found = {}
        for kind, key in ceiling_cache_keys(cfg, r.device).items():
            if kind in have:
                continue
            entry = cache.get(key)
            value = finite(entry.get("value")) if isinstance(entry, dict) else None
            if value is not None and value > 0:
                found[kind] = value
        if not found:
            continue
        for kind, value in found.items():
            r.metrics[f"{kind}_ceiling"] = value
        if len(found) + len(have) == 2:  # the verdict needs both; with one, the data-wait share still decides
            r.metrics.pop("ceiling_skipped", None)
            r.metrics.update(of_record(r).metrics())
