"""The search and its confirmation in one Tune run (tuner.search._phases): planted searchers stand for Optuna's and
the re-runs', so the hand-over is checked step by step without Ray."""

from __future__ import annotations

from ray.tune.search import Searcher

from tuner.search._phases import PhasedSearcher


class Planted(Searcher):
    """Hands out `n` configs named `name`-i (then FINISHED), and keeps what it was told."""

    def __init__(self, name: str, n: int | None = None) -> None:
        super().__init__()
        self.name, self.n, self.given = name, n, 0
        self.results: list[str] = []
        self.completed: list[tuple[str, bool]] = []

    def suggest(self, trial_id):
        if self.n is not None and self.given >= self.n:
            return Searcher.FINISHED
        self.given += 1
        return {"name": f"{self.name}-{self.given - 1}"}

    def on_trial_result(self, trial_id, result):
        self.results.append(trial_id)

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, error))


def test_the_confirmation_starts_only_once_every_search_trial_has_ended_and_is_planned_then():
    search, reruns, asked = Planted("trial"), Planted("rerun", n=2), []

    def confirmation():
        asked.append(len(search.completed))  # what the search had recorded when the re-runs were planned
        return reruns

    phases = PhasedSearcher(search, 2, confirmation)
    assert phases.suggest("a")["name"] == "trial-0"
    assert phases.suggest("b")["name"] == "trial-1"
    assert phases.suggest("c") is None and phases.suggest("c") is None  # two trials asked; "a" and "b" still run
    phases.on_trial_complete("a", {})
    assert phases.suggest("c") is None and not asked  # "b" still runs: no re-run yet
    phases.on_trial_complete("b", {}, error=True)  # a trial that failed has ended too
    assert phases.suggest("c")["name"] == "rerun-0" and asked == [2]
    assert phases.suggest("d")["name"] == "rerun-1"
    phases.on_trial_result("c", {})
    phases.on_trial_complete("c", {})
    assert phases.suggest("e") == Searcher.FINISHED
    assert search.completed == [("a", False), ("b", True)] and search.results == []  # each its own trials' news
    assert reruns.completed == [("c", False)] and reruns.results == ["c"]
    assert asked == [2]  # planned once


def test_a_search_with_no_more_trials_to_give_hands_over_early_and_nothing_to_confirm_ends_the_run():
    search = Planted("trial", n=1)  # e.g. --study-seconds: the searcher stops before the trial count
    phases = PhasedSearcher(search, 5, lambda: None)
    assert phases.suggest("a")["name"] == "trial-0"
    assert phases.suggest("b") is None
    phases.on_trial_complete("a", {})
    assert phases.suggest("b") == Searcher.FINISHED and phases.confirm_started


def test_a_resumed_study_whose_search_is_over_starts_with_its_reruns():
    reruns = Planted("rerun", n=1)
    phases = PhasedSearcher(None, 0, lambda: reruns)
    assert phases.suggest("a")["name"] == "rerun-0"
    assert phases.suggest("b") == Searcher.FINISHED
