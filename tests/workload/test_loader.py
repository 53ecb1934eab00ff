"""Finding a workload by reference: built-ins, package.module:name, path/file.py:name; errors that name the path;
the user's frames in a traceback; what Ray must ship."""

import re
import sys

import pytest

from tuner.errors import WorkloadError
from tuner.builtin import resolve_workload
from tuner.workload import build, factory_arguments, import_factory, ship_paths, user_error_line, user_traceback
from tuner.workload.shipping import shipped_copy
from tests.helpers.userworkloads import GOOD, write


def test_builtins_and_file_references_resolve(tmp_path, monkeypatch):
    assert resolve_workload("gan").module == "tuner.builtin.gan" and resolve_workload("gan").builtin
    path = write(tmp_path / "proj", GOOD)
    monkeypatch.chdir(tmp_path)
    ref = resolve_workload("proj/mywork.py:make")
    assert ref.file == str(path.resolve()) and ref.text == f"{path.resolve()}:make" and ref.module == "mywork"
    wl = build(ref, {"hidden": 4})
    assert set(wl.models) == {"net"} and wl.quality == ("val_loss", "minimize")
    assert ship_paths(ref) == [str(path.parent.resolve())]  # its folder, for what it finds beside it
    assert ship_paths(resolve_workload("cnn")) == []


def test_a_dotted_module_is_found_from_the_working_folder_and_its_package_is_shipped(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    write(pkg, "", "__init__.py")
    write(pkg, GOOD, "work.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    ref = resolve_workload("mypkg.work:make")
    assert build(ref).quality == ("val_loss", "minimize")
    assert ship_paths(ref) == [str(pkg.resolve())]
    sys.modules.pop("mypkg.work", None)
    sys.modules.pop("mypkg", None)


NEIGHBOUR = GOOD.replace("import tuner", """import tuner
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
import helper_beside
from pathlib import Path
HIDDEN = int((Path(__file__).parent / "hidden.txt").read_text())""")
NEIGHBOUR = NEIGHBOUR.replace("def make(hidden=8)", "def make(hidden=HIDDEN)")


def _project(folder, name):
    """A workload that finds a module and a data file beside it by `__file__`, as users write them."""
    write(folder, NEIGHBOUR, f"{name}.py")
    write(folder, "VALUE = 1\n", "helper_beside.py")
    (folder / "hidden.txt").write_text("5")
    return folder / f"{name}.py"


def test_a_worker_on_the_drivers_machine_imports_the_original_file_so_its_neighbours_are_found(tmp_path, monkeypatch):
    """Where the original path exists on the worker's machine (one machine, a shared file system), the worker
    imports it, not Ray's copy: a workload that reads a file or imports a module beside it by `__file__` failed in
    every trial (ModuleNotFoundError) while the driver's pre-flight passed."""
    original = _project(tmp_path / "proj", "shipme")
    shipped_dir = tmp_path / "session" / "runtime_resources" / "py_modules_files" / "_ray_pkg_1"
    write(shipped_dir, NEIGHBOUR, "shipme.py")  # the file alone, as tuner shipped it before
    ref = resolve_workload(f"{original}:make")
    monkeypatch.setattr(sys, "path", [str(shipped_dir), *sys.path])
    for name in ("shipme", "helper_beside"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert build(ref).models["net"]()[0].out_features == 5  # hidden.txt, read beside the file
    assert sys.modules["shipme"].__file__ == str(original.resolve())
    sys.modules.pop("shipme", None)
    sys.modules.pop("helper_beside", None)


def test_a_ray_worker_on_another_node_imports_the_shipped_folder_so_its_neighbours_are_found(tmp_path, monkeypatch):
    """On a node without the original path, the worker imports Ray's copy of the file's folder (ship_paths ships
    the folder), where the module and data beside it are too."""
    original = _project(tmp_path / "proj", "shipfar")
    ref = resolve_workload(f"{original}:make")
    assert ship_paths(ref) == [str(original.parent.resolve())]
    shipped_dir = tmp_path / "session" / "runtime_resources" / "py_modules_files" / "_ray_pkg_2"
    shipped = _project(shipped_dir / "proj", "shipfar")  # Ray unpacks a folder under its own name
    (shipped.parent / "hidden.txt").write_text("3")
    for path in original.parent.iterdir():
        path.unlink()
    original.parent.rmdir()  # the other node: no such path
    monkeypatch.setattr(sys, "path", [str(shipped_dir), *sys.path])
    for name in ("shipfar", "helper_beside"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert shipped_copy(ref) == shipped.resolve()
    assert build(ref).models["net"]()[0].out_features == 3  # the shipped folder's hidden.txt
    assert sys.modules["shipfar"].__file__ == str(shipped.resolve())
    sys.modules.pop("shipfar", None)
    sys.modules.pop("helper_beside", None)


def test_a_big_folder_is_not_shipped_the_file_alone_goes_with_a_note(tmp_path, monkeypatch):
    import tuner.workload.shipping as shipping

    original = _project(tmp_path / "proj", "shipbig")
    (tmp_path / "proj" / ".git").mkdir()
    (tmp_path / "proj" / ".git" / "pack").write_bytes(b"x" * 4096)  # caches and VCS do not count
    ref = resolve_workload(f"{original}:make")
    monkeypatch.setattr(shipping, "SHIP_FOLDER_MAX_BYTES", 2048)
    assert shipping.shipment(ref) == shipping.Shipment([str(original.parent.resolve())])
    (tmp_path / "proj" / "weights.bin").write_bytes(b"x" * 4096)
    shipped = shipping.shipment(ref)
    assert shipped.paths == [str(original.resolve())]
    assert shipped.note and str(original.parent.resolve()) in shipped.note and "only shipbig.py" in shipped.note


def test_the_reports_folder_beside_the_model_is_neither_counted_nor_shipped(tmp_path, monkeypatch):
    """`tuner search --workload model.py:make` run in the model's folder writes studies to ./reports, beside it:
    that output (databases, caches, every earlier study) is left out of what Ray ships and of the size limit, so
    the folder still ships with the modules beside the model. Checked with Ray's own matcher of runtime_env
    excludes."""
    from ray._private.runtime_env.packaging import _get_excludes

    import tuner.workload.shipping as shipping
    from tuner.search._ray_env import ship_excludes

    original = _project(tmp_path / "proj", "shipreports")
    reports = tmp_path / "proj" / "reports"
    (reports / "s1").mkdir(parents=True)
    (reports / "s1" / "study.db").write_bytes(b"x" * 4096)
    (tmp_path / "proj" / "sub" / "reports").mkdir(parents=True)  # only the study's own folder, not any "reports"
    (tmp_path / "proj" / "sub" / "reports" / "keep.txt").write_text("data")
    ref = resolve_workload(f"{original}:make")
    monkeypatch.setattr(shipping, "SHIP_FOLDER_MAX_BYTES", 2048)
    shipped = shipping.shipment(ref, leave_out=reports)
    assert shipped.paths == [str(original.parent.resolve())] and shipped.note is None
    left_out = _get_excludes(original.parent, [*ship_excludes(), *shipped.excludes])
    assert left_out(reports / "s1" / "study.db") and not left_out(original)
    assert not left_out(tmp_path / "proj" / "sub" / "reports" / "keep.txt")
    # elsewhere, the reports folder changes nothing; without leaving it out the folder is too big
    assert shipping.shipment(ref, leave_out=tmp_path / "elsewhere") == shipping.shipment(ref)
    assert shipping.shipment(ref).paths == [str(original.resolve())]


def test_outside_ray_the_file_itself_is_imported(tmp_path, monkeypatch):
    original = write(tmp_path / "proj", GOOD, "notshipped.py")
    ref = resolve_workload(f"{original}:make")
    assert shipped_copy(ref) is None
    assert build(ref).models["net"]()[0].out_features == 8
    assert sys.modules["notshipped"].__file__ == str(original.resolve())
    sys.modules.pop("notshipped", None)


@pytest.mark.parametrize("text, message", [
    ("rnn", r"unknown workload 'rnn'; use a built-in \(gan, cnn\)"),
    ("missing.py:make", "no such file"),
    ("mod:not-a-name", "is not a Python name"),
    ("1mod.sub:make", "is not a module path"),
])
def test_malformed_references_say_what_a_reference_looks_like(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkloadError, match=message):
        resolve_workload(text)


def test_a_missing_file_named_in_a_space_says_its_path_is_read_from_that_files_folder(tmp_path, monkeypatch):
    """A space's default workload is read relative to the space file, not to where tuner runs: the error says so
    (it said "the folder you run tuner in" while naming a path under the space's folder)."""
    monkeypatch.chdir(tmp_path)
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    with pytest.raises(WorkloadError, match=f"no such file {spaces.resolve()}/examples/mine.py; check the path "
                                            rf"\(relative paths are read from {spaces.resolve()}, the folder of the "
                                            "file that names it"):
        resolve_workload("examples/mine.py:make", base=spaces)


@pytest.mark.parametrize("body, attr, options, message", [
    ("def make(:\n", "make", {}, r"cannot import .*SyntaxError: .*\(at .*bad.py:1\)"),
    ("import no_such_module_anywhere\n", "make", {}, "ModuleNotFoundError: No module named 'no_such_module_anywhere'"),
    ("def make():\n    return 1\n", "build", {}, "has no attribute 'build'"),
    ("make = 3\n", "make", {}, "is a int, not a function"),
    ("def make():\n    return 1\n", "make", {}, "returned a int, not a tuner.Workload"),
    ("def make(width=1):\n    return 1\n", "make", {"height": 2}, r"does not fit make\(\).*it takes: width"),
])
def test_import_and_factory_errors_name_the_file(tmp_path, body, attr, options, message):
    path = write(tmp_path, body, "bad.py")
    with pytest.raises(WorkloadError, match=message):
        build(resolve_workload(f"{path}:{attr}"), options)
    sys.modules.pop("bad", None)


OPTION_TYPES = """from __future__ import annotations

from typing import Optional

import tuner


def make(image_size: int = 32, scale: float = 1.0, fused: bool = False, name: str = "x", limit: Optional[int] = None,
         depth=3, extra: list | None = None):
    return tuner.Workload(models={}, datasets=lambda: ([], []), loss=lambda m, b: 0)
"""


@pytest.mark.parametrize("options, message", [
    ({"image_size": "abc"}, "option image_size='abc' is a string, not a whole number, as make() declares image_size; "
                            "give one, e.g. image_size=32 (its default)"),
    ({"image_size": 64.5}, "image_size=64.5 is a decimal number, not a whole number"),
    ({"image_size": True}, "image_size=true is a bool, not a whole number"),
    ({"image_size": None}, "image_size=null is empty, not a whole number"),
    ({"scale": "big"}, "scale='big' is a string, not a number, as make() declares scale; give one, e.g. scale=1.0"),
    ({"fused": 1}, "fused=1 is a whole number, not a bool \\(true or false\\).*e.g. fused=false"),
    ({"limit": "ten"}, "limit='ten' is a string, not a whole number, as make\\(\\) declares limit; give one$"),
    ({"depth": "deep"}, "depth='deep' is a string, not a whole number"),  # no annotation: the default's type
])
def test_an_option_value_of_the_wrong_type_is_one_line_naming_the_option_and_what_make_declares(tmp_path, options,
                                                                                               message):
    """`--option image_size=abc` reads as the string 'abc' (values are YAML): refused before the factory runs, by
    the type its signature declares, not left to the model's own TypeError deep in its first call."""
    path = write(tmp_path, OPTION_TYPES, "typed.py")
    with pytest.raises(WorkloadError, match=message if "\\" in message else re.escape(message)):
        build(resolve_workload(f"{path}:make"), options)
    sys.modules.pop("typed", None)


def test_option_values_that_fit_the_signature_are_passed_as_given(tmp_path):
    """A whole number fits a float, None an Optional, anything an undeclared type (as Python takes them): no
    refusal."""
    path = write(tmp_path, OPTION_TYPES, "typed_ok.py")
    ref = resolve_workload(f"{path}:make")
    opts = {"image_size": 64, "scale": 2, "fused": True, "name": "x2", "limit": None, "depth": 5, "extra": [1]}
    assert factory_arguments(ref, import_factory(ref), opts, None) == opts
    sys.modules.pop("typed_ok", None)


@pytest.mark.parametrize("raw, given, text", [("2024", 2024, "2024"), ("1.5", 1.5, "1.5"), ("true", True, "true"),
                                              ("abc", "abc", "abc"), ("null", None, None)])
def test_a_number_or_bool_yaml_read_for_a_str_parameter_reaches_make_as_its_text(tmp_path, raw, given, text):
    """`-o name=2024` reads as YAML's int 2024; make() declares `name: str`, so it gets the string '2024', not an
    int its own code would trip on (None stays None for an Optional[str])."""
    from tuner.cli.search import parse_options

    path = write(tmp_path, OPTION_TYPES.replace('name: str = "x"', "name: Optional[str] = None"), "typed_text.py")
    ref = resolve_workload(f"{path}:make")
    opts = parse_options([f"name={raw}", "image_size=64"])
    assert opts["name"] == given
    args = factory_arguments(ref, import_factory(ref), opts, None)
    assert args["name"] == text and type(args["name"]) is type(text) and args["image_size"] == 64
    sys.modules.pop("typed_text", None)


def test_user_traceback_keeps_the_users_frames_and_folds_the_rest(tmp_path):
    path = write(tmp_path, "def inner():\n    raise ValueError('boom in user code')\n\ndef outer():\n    inner()\n",
                 "userframes.py")
    import importlib.util

    spec = importlib.util.spec_from_file_location("userframes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.outer()
    except ValueError as err:
        text = user_traceback(err)
        line = user_error_line(err)
    assert f'File "{path}", line 5, in outer' in text and f'File "{path}", line 2, in inner' in text
    assert "raise ValueError('boom in user code')" in text and text.endswith("ValueError: boom in user code")
    assert "frame" in text and "tests/workload" in text  # this test's own frame is the user's too
    assert line == f"ValueError: boom in user code (at {path}:2)"


def test_an_error_in_tuner_or_a_library_alone_has_no_user_traceback():
    try:
        int("x")
    except ValueError as err:
        text = user_traceback(err)
    assert text is not None  # this test file is user code from tuner's point of view
    import torch

    try:
        torch.zeros(2) @ torch.zeros(3)
    except RuntimeError as err:
        err.__traceback__ = None  # as raised inside a library with no caller frames
        assert user_traceback(err) is None


def test_a_workload_s_importable_sources_are_its_folder_s_and_its_packages_py_files_never_data_or_caches(tmp_path):
    """What tells a workload's source apart (a parity verdict's cache key): an edit to a module it can import
    changes it; a data folder's script, a virtualenv's package or a cache does not."""
    from tuner.workload import importable_sources

    files = {"mine.py": "", "helpers/__init__.py": "", "helpers/nets.py": "", "helpers/deep/__init__.py": "",
             "helpers/deep/blocks.py": "", "data/prepare.py": "", ".venv/__init__.py": "", ".venv/site.py": "",
             "helpers/__pycache__/__init__.py": "", "notes.txt": ""}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = sorted(str(p.relative_to(tmp_path)) for p in importable_sources(tmp_path))
    assert found == ["helpers/__init__.py", "helpers/deep/__init__.py", "helpers/deep/blocks.py", "helpers/nets.py",
                     "mine.py"]
