"""The real-CUDA tests (tests/cuda) stay real: each module carries the cuda marker (skipped without a GPU) and none
reaches for the CPU stand-in that the CPU tests use for CUDA's branches."""

from pathlib import Path

import pytest

CUDA_TESTS = sorted((Path(__file__).parent / "cuda").glob("test_*.py"))


def test_there_are_cuda_tests():
    assert len(CUDA_TESTS) >= 4


@pytest.mark.parametrize("path", CUDA_TESTS, ids=lambda p: p.name)
def test_a_cuda_test_module_is_marked_and_fakes_nothing(path):
    text = path.read_text()
    assert "pytestmark = CUDA" in text
    for fake in ("FakeCudaDevice", 'Device("cuda", torch.device("cpu")', "fakes import"):
        assert fake not in text, f"{path.name} uses {fake}: tests/cuda run real CUDA only"
