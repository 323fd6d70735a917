"""The committed fixtures the Rust tests use, and their transformers / sentence-transformers
references. Nothing here needs torch or the network."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# float32 against transformers' or sentence-transformers' float32 outputs on the random-init
# fixtures (std 0.2 to 0.5): the largest difference seen over every test here is printed by
# test_reference_bounds.py; the Rust tests allow 1e-4.
TOLERANCE = 1e-5


def fixture(*parts: str) -> Path:
    return FIXTURES.joinpath(*parts)


def reference(*parts: str) -> dict:
    with open(fixture(*parts), encoding="utf-8") as f:
        return json.load(f)


def folder_copy(tmp_path: Path, source: Path, name: str = "model") -> Path:
    """A copy of a fixture folder, to edit one file of it."""
    target = tmp_path / name
    shutil.copytree(source, target)
    return target


def write_json(folder: Path, name: str, value) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


WORST = {}


def assert_close(what: str, ours, want, tol: float = TOLERANCE, relative_above_one: bool = False) -> None:
    ours = np.asarray(ours, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert ours.shape == want.shape, f"{what}: shape {ours.shape}, reference {want.shape}"
    diff = np.abs(ours - want)
    if relative_above_one:
        diff = diff / np.maximum(np.abs(want), 1.0)
    worst = float(diff.max()) if diff.size else 0.0
    WORST[what] = worst
    assert worst <= tol, f"{what}: max diff {worst:.3e} > {tol:.0e}"


def pytest_terminal_summary(terminalreporter):
    if WORST:
        what, worst = max(WORST.items(), key=lambda kv: kv[1])
        terminalreporter.write_line(
            f"largest difference from the references over {len(WORST)} comparisons: {worst:.2e} ({what})"
        )


@pytest.fixture
def fresh(tmp_path):
    """A folder copy maker bound to this test's temporary directory."""
    return lambda source, name="model": folder_copy(tmp_path, source, name)
