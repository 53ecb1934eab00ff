"""A study's search and its confirmation in one Ray Tune run.

A Tune run of its own for the confirmation paid Tune's start-up and a fresh trial process again: 2-2.6 s on this
2-core host between the search's last trial and the first re-run, the worker's imports of Tune and tuner included
(issue 20 item 6). In one run, the trial process (reuse_actors) that ran the search's last trial runs the re-runs.

The searcher here hands out the search's trials (tuner.search._searcher) until it has asked for as many as the
study runs or it has no more (--study-seconds), waits for every one of them to end, then asks the runner for the
confirmation's searcher (tuner.search._reruns), built then from the study folder as the search left it, and hands
out its re-runs. Each trial's reports go to the searcher that suggested it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.tune.search import Searcher


class PhasedSearcher(Searcher):
    """The search's `trials` from `search` (None: the search is over, e.g. a resumed study), then the re-runs of
    the searcher `confirmation()` builds once the search has ended (None from it: nothing to confirm)."""

    def __init__(self, search: Searcher | None, trials: int, confirmation: Callable[[], Searcher | None]) -> None:
        super().__init__()
        self.search, self.trials = search, max(0, int(trials))
        self.confirmation = confirmation
        self.confirming: Searcher | None = None
        self.asked = 0  # the search's trials handed out
        self.searching = search is not None and self.trials > 0
        self.running: set[str] = set()  # the search's trials not yet ended
        self.reruns: set[str] = set()  # trial ids of the confirmation's re-runs
        self.confirm_started = False  # the search ended and the confirmation was asked for

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the searcher with the tune config; the runner's
        return {**self.__dict__, "confirmation": None}  # closure (view, storage) stays here

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        if self.search is not None:
            self.search.set_search_properties(metric, mode, config, **spec)
        return True

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.searching:
            if self.asked < self.trials:
                assert self.search is not None
                config = self.search.suggest(trial_id)
                if config is None:
                    return None
                if config != Searcher.FINISHED:
                    self.asked += 1
                    self.running.add(trial_id)
                    return config
            self.searching = False  # asked for every trial, or the searcher has no more (the allowance)
        if self.running:  # the confirmation is planned on the search's records: all of them
            return None
        if not self.confirm_started:
            self.confirm_started = True
            self.confirming = self.confirmation()
        if self.confirming is None:
            return Searcher.FINISHED
        config = self.confirming.suggest(trial_id)
        if isinstance(config, dict):
            self.reruns.add(trial_id)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        searcher = self._of(trial_id)
        if searcher is not None:
            searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        searcher = self._of(trial_id)
        self.running.discard(trial_id)
        if searcher is not None:
            searcher.on_trial_complete(trial_id, result=result, error=error)

    def _of(self, trial_id: str) -> Searcher | None:
        return self.confirming if trial_id in self.reruns else self.search

    def save(self, checkpoint_path: str) -> None:  # resume reads the study folder and the Optuna study
        pass

    def restore(self, checkpoint_path: str) -> None:
        pass
