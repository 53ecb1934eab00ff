"""PostgreSQL as the study's Optuna storage, against a real server the tests start (tests/helpers/servers.py): a study
whose driver is killed with SIGKILL resumes on it without losing or redoing a trial, while two `tuner report`
readers read the study folder the whole time. And a PostgreSQL URL without a driver is one line naming the fix."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.searchproc import kill_and_resume, report_json, trial_numbers
from tests.helpers.servers import postgres_bin, start_postgres
from tests.helpers.spaces_for_tests import tiny_space
from tuner.cli import main
from tuner.errors import ConfigError
from tuner.search._storage import engine_url, has_password, kept_url, shown_url


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}; .ci/run installs it")
    pytest.skip(f"{what}; CI runs this test")


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server on 127.0.0.1 for this module, stopped (and its folder removed) at the end."""
    if postgres_bin() is None:
        _missing("PostgreSQL server binaries (initdb, pg_ctl) not found (Debian: apt-get install -y postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[test]')")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def two_readers(study_dir: Path) -> Iterator[list[list[list[int]]]]:
    """Two `tuner report --format json` loops reading the study while it is written. After the block, every read
    must have exited 0 with one valid JSON document, and each reader's trials must only have grown."""
    stop = threading.Event()
    reads: list[list[list[int]]] = [[], []]
    failures: list[str] = []

    def loop(i: int) -> None:
        while not stop.is_set() and not (study_dir / "study.json").is_file():
            time.sleep(0.05)
        while not stop.is_set():
            code, out, err = report_json(study_dir.name, study_dir.parent)
            try:
                assert code == 0, f"exit {code}: {err.strip()}"
                reads[i].append(trial_numbers(out))
            except Exception as failure:  # noqa: BLE001 - collected, asserted after the block
                failures.append(f"reader {i}: {type(failure).__name__}: {failure}; stdout {out[:300]!r}")
                return

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    try:
        yield reads
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=150)
    assert not failures, failures
    for i, seen in enumerate(reads):
        assert len(seen) >= 3, f"reader {i} read only {len(seen)} times"
        for earlier, later in zip(seen, seen[1:]):
            assert set(earlier) <= set(later), f"reader {i}: trials went from {earlier} to {later}"


def test_a_study_on_postgresql_resumes_after_sigkill_while_two_readers_read_it(postgres, tmp_path, capsys,
                                                                              monkeypatch):
    readers: list[list[list[int]]] = []

    @contextlib.contextmanager
    def during(study_dir: Path) -> Iterator[None]:
        with two_readers(study_dir) as reads:
            readers.append(reads)  # type: ignore[arg-type]
            yield

    records = kill_and_resume(tmp_path, space_text=tiny_space(trials=6), trials=6, storage=postgres.url,
                              during=during)
    assert (tmp_path / "reports" / "tiny" / "study.db").exists() is False  # the study lives in PostgreSQL
    reads = readers[0]
    assert max(len(seen) for r in reads for seen in r) <= len(records)
    assert any(0 < len(seen) < len(records) for r in reads for seen in r), "no read saw the study half-written"

    # Resumed where the driver is missing: one line naming the extra, before anything is touched.
    for module in ("psycopg", "psycopg2"):
        monkeypatch.setitem(sys.modules, module, None)
    before = sorted(p.name for p in (tmp_path / "reports" / "tiny").rglob("*"))
    code = main(["search", "--study", "tiny", "--resume", "--trials", "8", "--reports-dir", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'tuner[postgres]'" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in (tmp_path / "reports" / "tiny").rglob("*")) == before


def test_a_database_that_is_not_there_is_one_line_and_nothing_is_written(postgres, space_search):
    url = postgres.url.rsplit("/", 1)[0] + "/no_such_db"
    code, _, err, _, reports = space_search.run(tiny_space(trials=2), "--storage", url, name="tiny.yaml")
    assert code == 2, err
    assert err.startswith(f"tuner: error: --storage {url}: cannot open the database") and "no_such_db" in err
    assert len(err.strip().splitlines()) == 1
    assert not reports.exists()


@pytest.mark.parametrize("url", ["postgresql://user@127.0.0.1:1/db", "postgres://user:secret@127.0.0.1:1/db",
                                 "postgresql+psycopg://user@127.0.0.1:1/db"])
def test_a_postgresql_url_without_a_driver_is_one_line_naming_the_extra(space_search, monkeypatch, url):
    for module in ("psycopg", "psycopg2"):  # as on a machine where neither is installed
        monkeypatch.setitem(sys.modules, module, None)
    code, _, err, _, reports = space_search.run(tiny_space(trials=2), "--storage", url, name="tiny.yaml")
    assert code == 2, err
    assert "no PostgreSQL driver installed" in err and "pip install 'tuner[postgres]'" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "secret" not in err  # a password in the URL is not printed
    assert not reports.exists()


def test_storage_urls_map_to_the_driver_that_is_installed(monkeypatch):
    pytest.importorskip("psycopg")
    monkeypatch.setitem(sys.modules, "MySQLdb", None)  # as where mysqlclient is not installed
    assert engine_url("sqlite:///x/study.db") == "sqlite:///x/study.db"
    assert engine_url("postgres://u:pw@h:5433/d") == "postgresql+psycopg://u:pw@h:5433/d"
    assert engine_url("postgresql+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"
    assert shown_url("postgresql://u:secret@h/d") == "postgresql://u:***@h/d"
    with pytest.raises(ConfigError, match=r"no MySQL driver installed \(mysqldb\); pip install PyMySQL"):
        engine_url("mysql://u@h/d")
    with pytest.raises(ConfigError, match="unknown kind of database 'mongodb'"):
        engine_url("mongodb://u@h/d")


PASSWORD = "Pw-s3cret-42"


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:pw1@h/d", "postgresql://u:***@h/d"),
    ("postgresql://u@h/studies?password=pw1", "postgresql://u@h/studies?password=***"),
    ("postgresql://u@h/d?sslmode=require&PGPASSWORD=pw1", "postgresql://u@h/d?sslmode=require&PGPASSWORD=***"),
    ("postgresql://u@h/d?sslpassword=pw1&passfile=/home/u/.pgpass",
     "postgresql://u@h/d?sslpassword=***&passfile=/home/u/.pgpass"),  # passfile names a file: not a secret
    ("postgresql://u:pw1@h1:5432,h2:5433/d?password=pw1", "postgresql://u:***@h1:5432,h2:5433/d?password=***"),
])
def test_every_form_of_a_storage_password_is_masked_and_kept_in_storage_url(url, shown):
    """The password in the userinfo, as a `password=` query parameter (libpq and SQLAlchemy accept both), in a
    PGPASSWORD-style or sslpassword option, in a URL with several hosts: masked wherever a URL is shown or kept."""
    assert shown_url(url) == kept_url(url) == shown
    assert has_password(url)  # so --resume finds the whole URL in storage.url


def test_an_unreachable_server_names_the_url_without_its_password(space_search):
    pytest.importorskip("psycopg")
    url = f"postgresql://u@127.0.0.1:1/studies?password={PASSWORD}"  # port 1: nothing listens
    code, _, err, _, reports = space_search.run(tiny_space(trials=2), "--storage", url, name="tiny.yaml")
    assert code == 2 and "cannot open the database" in err and len(err.strip().splitlines()) == 1, err
    assert PASSWORD not in err and "password=***" in err
    assert not reports.exists()


@pytest.mark.ray
def test_a_url_with_several_hosts_reaches_the_database_libpq_would(postgres, ray_session, space_search):
    """`h1:1,h2:2` (libpq tries each host in turn): the first host is down, the second is the server."""
    host = f"127.0.0.1:{postgres.port}"
    url = postgres.url.replace(host, f"127.0.0.1:1,{host}")
    assert engine_url(url).endswith(f"/{postgres.database}?host=127.0.0.1%3A1&host=127.0.0.1%3A{postgres.port}")
    code, _, err, _, reports = space_search.run(tiny_space(trials=2), "--study", "multihost", "--storage", url,
                                                "--trials", "1", "--confirm", "0", "--no-probe", name="tiny.yaml")
    assert code == 0, err
    assert json.loads((reports / "multihost" / "study.json").read_text())["storage"] == url




@pytest.mark.ray
@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_a_storage_password_is_kept_in_one_file_only_and_resume_reads_it(postgres, ray_session, capsys,
                                                                         space_search, form):
    """A PostgreSQL password in --storage (`user:pw@` or `?password=pw`): study.json, reports (html, json, table),
    the export and Ray's pickles in the study folder hold the URL masked; `storage.url` (0600) holds it whole, and
    --resume reads it there."""
    url = postgres.url.replace(f"//{postgres.user}@", f"//{postgres.user}:{PASSWORD}@") if form == "userinfo" \
        else f"{postgres.url}?password={PASSWORD}"
    name = f"secret-{form}"  # one database for the module: a study name of its own
    first = space_search.run(tiny_space(trials=2), "--study", name, "--storage", url, "--confirm", "1", "--repeats",
                             "1", name="tiny.yaml")
    assert first.code == 0, first.err
    reports = first.reports
    common = ["--reports-dir", str(reports)]
    assert main(["search", "--study", name, "--resume", "--trials", "3", *common]) == 0, capsys.readouterr().err
    assert main(["report", name, "--format", "html", *common]) == 0
    assert main(["report", name, "--format", "json", *common]) == 0
    assert main(["report", name, *common]) == 0
    assert main(["export", name, *common]) == 0
    out, err = capsys.readouterr()
    assert PASSWORD not in first.out + first.err + out + err

    study_dir = reports / name
    assert (study_dir / "report.html").is_file() and list((study_dir / "ray").rglob("*.pkl"))
    holders = [str(p.relative_to(study_dir)) for p in study_dir.rglob("*")
               if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert holders == ["storage.url"]
    secret = study_dir / "storage.url"
    assert secret.read_text().strip() == url and secret.stat().st_mode & 0o777 == 0o600
    assert json.loads((study_dir / "study.json").read_text())["storage"].count("***") == 1
