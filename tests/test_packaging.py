"""What `pip install` of a wheel or an sdist carries: the bundled spaces (search_spaces/ in the repository, the
package tuner.spaces once installed), so `tuner spaces` and `tuner search --space NAME` work outside a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPACES = sorted(p.name for p in (REPO / "search_spaces").glob("*.yaml"))
# What building needs of the checkout (not the studies, caches or tests).
NOT_SOURCE = shutil.ignore_patterns(".git", "reports", "tests", "benchmarks", "build", "dist", "*.egg-info", ".venv",
                                    "__pycache__", ".pytest_cache")


@pytest.fixture
def source(tmp_path) -> Path:
    """A copy of the checkout (links kept), so builds leave no build/ or egg-info in the repository."""
    src = tmp_path / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=NOT_SOURCE)
    return src


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def _site_dirs() -> list[str]:
    """The site-packages folders this interpreter imports tuner's dependencies from (a venv's, a user's or the
    system's): not `--system-site-packages`, which from inside a venv gives the *base* interpreter's folders."""
    return [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]


def _lend_dependencies(venv: Path) -> None:
    """Put this interpreter's site folders after the fresh venv's own, through a .pth file: the wheel installed in
    the venv is imported first, its dependencies come from here, and the editable checkout is not on the path (a
    plain path line in a .pth does not run the other folder's own .pth files, where the editable finder lives)."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "zz_tuner_test_dependencies.pth").write_text("".join(f"{d}\n" for d in _site_dirs()))


def test_a_wheel_installed_in_a_fresh_venv_lists_and_shows_the_bundled_spaces(source, tmp_path):
    assert SPACES, "no bundled spaces in search_spaces/"
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "-w", wheels, "-q"],
         cwd=tmp_path)
    (wheel,) = wheels.glob("tuner-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("tuner/spaces/")) == SPACES

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    _lend_dependencies(venv)
    _run([venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "-q", wheel], cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"  # not the checkout, nothing named tuner or search_spaces around
    elsewhere.mkdir()
    where = _run([venv / "bin" / "python", "-c", "import tuner; print(tuner.__file__)"], cwd=elsewhere).stdout
    assert Path(where.strip()).is_relative_to(venv), f"the venv imports tuner from {where}"
    listed = _run([venv / "bin" / "tuner", "spaces"], cwd=elsewhere).stdout
    assert all(Path(name).stem in listed for name in SPACES), listed
    shown = _run([venv / "bin" / "tuner", "spaces", "show", "amp_loader"], cwd=elsewhere).stdout
    first = shown.splitlines()[0]
    assert first.startswith("# amp_loader: ") and Path(first.split(": ", 1)[1]).is_relative_to(venv), first
    assert (REPO / "search_spaces" / "amp_loader.yaml").read_text().strip() in shown


def test_an_sdist_carries_the_bundled_spaces(source, tmp_path):
    try:
        import build  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("`build` is not installed; it is in the test extra (pip install -e '.[test]')")
        pytest.skip("`build` is not installed (pip install build); pip itself cannot build an sdist")
    out = tmp_path / "sdist"
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", out, source], cwd=tmp_path)
    (sdist,) = out.glob("tuner-*.tar.gz")
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1]: m for m in tf.getmembers() if "/" in m.name}
    carried = sorted(n.rsplit("/", 1)[1] for n, m in members.items() if n.startswith("tuner/spaces/") and m.isfile())
    assert carried == SPACES
