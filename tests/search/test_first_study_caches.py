"""Issue 55 item 2: a first study on a machine says what its pre-flight built that the cache lacked, and its time;
a second study, whose cache holds them, says nothing (planted cache folders)."""

from tuner.search._caches import built_note, cache_entries


def _fill(cache):
    for path in ("fid/digits-32px/classifier.pt", "fid/digits-32px/real-classifier.pt", "fid/digits-32px/.lock",
                 "datasets/digits-32/train/0.png", "datasets/.lock"):
        (cache / path).parent.mkdir(parents=True, exist_ok=True)
        (cache / path).write_text("x")


def test_a_first_study_names_what_the_pre_flight_built_and_its_time(tmp_path):
    cache = tmp_path / ".cache"
    before = cache_entries(cache)  # no cache yet
    _fill(cache)
    note = built_note(before, cache_entries(cache), 12.3, cache)
    assert note is not None
    for part in ("the FID feature classifier (digits-32px)", "the real images' FID statistics (digits-32px)",
                 "the digits-32 dataset's files", "in its 12 s, once per machine", str(cache)):
        assert part in note
    assert ".lock" not in note


def test_a_second_study_with_the_caches_built_says_nothing(tmp_path):
    cache = tmp_path / ".cache"
    _fill(cache)
    held = cache_entries(cache)
    assert built_note(held, cache_entries(cache), 3.0, cache) is None
    (cache / "fid" / "digits-32px" / ".lock").write_text("again")  # a lock touched: not a build
    assert built_note(held, cache_entries(cache), 3.0, cache) is None
