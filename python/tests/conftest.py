"""Shared helpers of the Python package's tests (CPU path; GPU tests skip themselves)."""

from __future__ import annotations

import ast
import os
import pathlib

import numpy as np
import pytest

import fusejit
import fusejit.translate

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples" / "graphs").glob("*.txt"))
# Small, uneven dim values for the CPU runs (every sample's real size is far too big for CI).
SMALL_DIMS = (5, 3, 7, 2, 6)


@pytest.fixture(autouse=True)
def _no_dump_dir(monkeypatch):
    """FUSEJIT_DUMP_DIR left set in the shell would build every unfused plan at compile and write
    folders (tests count compiles and cache outcomes); a test that wants it sets it."""
    monkeypatch.delenv("FUSEJIT_DUMP_DIR", raising=False)


def fusejit_bin() -> pathlib.Path:
    """The `fusejit` command of this build (ctest sets FUSEJIT_BIN)."""
    p = pathlib.Path(os.environ.get("FUSEJIT_BIN") or ROOT / "build" / "cli" / "fusejit")
    if not p.exists():
        pytest.skip(f"no fusejit command at {p} (set FUSEJIT_BIN)")
    return p


def small_graph(path: pathlib.Path) -> fusejit.Graph:
    g = fusejit.Graph.load(str(path))
    return g.with_dims({d: SMALL_DIMS[k % len(SMALL_DIMS)] for k, d in enumerate(g.dims)})


def input_ranges(path: pathlib.Path) -> dict[str, tuple[float, float]]:
    return fusejit.translate.input_ranges(path.read_text())


def random_inputs(g: fusejit.Graph, rng: np.random.Generator, ranges: dict | None = None,
                  special: bool = False) -> dict[str, np.ndarray]:
    """Random arrays for every input of `g`, in its ranges; `special` mixes NaN, +-inf, -0.0,
    subnormals and extremes into float inputs (about a quarter of the elements)."""
    out = {}
    for t in g.inputs:
        dt = fusejit.numpy_dtype(t.dtype)
        shape = tuple(t.shape)
        if t.dtype == "bool":
            a = rng.random(shape) < 0.5
        elif t.dtype in ("i8", "u8", "i32", "i64"):
            info = np.iinfo(dt)
            a = rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)
        else:
            lo, hi = (ranges or {}).get(t.name, (-4.0, 4.0))
            a = rng.uniform(lo, hi, size=shape).astype(np.float32)
            if special and a.size:
                hard = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-39, 3e38, -3e38, 65504.0],
                                dtype=np.float32)
                mask = rng.random(shape) < 0.25
                a[mask] = rng.choice(hard, size=int(mask.sum()))
            with np.errstate(over="ignore"):  # 3e38 in f16 is inf, as intended
                a = a.astype(dt)
        out[t.name] = np.ascontiguousarray(a)
    return out


def bits(a: np.ndarray) -> bytes:
    """The raw bytes of an array in C order (bitwise comparison: NaN payloads, -0.0)."""
    return np.ascontiguousarray(a).tobytes()


def read_npy_bytes(path: pathlib.Path) -> tuple[tuple[int, ...], bytes]:
    """Shape and raw data of a .npy file (also for bf16, whose descr NumPy cannot read alone)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        hdr = f.read(2 if version[0] == 1 else 4)
        n = int.from_bytes(hdr, "little")
        header = ast.literal_eval(f.read(n).decode("latin1"))
        return tuple(header["shape"]), f.read()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
