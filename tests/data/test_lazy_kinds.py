"""A dataset kind's module (and torchvision with it) is imported only when that kind is used: torchvision's import
pulls in torch._dynamo, about 1.5 s of CPU in every trial process, `tuner train` and the CLI. digits reads its PNG
tree with PIL and never imports it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.datafiles import write_tree

PROBE = """
import json, sys
from pathlib import Path
import tuner.train.trial, tuner.search._trial, tuner.cli
before = 'torchvision' in sys.modules
from tuner.data import load_datasets
load_datasets({spec!r}, 8, Path(sys.argv[1]))
print(json.dumps([before, 'torchvision' in sys.modules]))
"""


@pytest.mark.parametrize("spec, after", [("synthetic", False), ("digits", False), ("folder:TREE", True)])
def test_torchvision_is_imported_only_by_a_kind_that_reads_images_with_it(tmp_path, spec, after):
    if spec == "folder:TREE":
        spec = f"folder:{write_tree(tmp_path / 'tree', {'a': 2, 'b': 3})}"
    out = subprocess.run([sys.executable, "-c", PROBE.format(spec=spec), str(tmp_path)], capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, after]
