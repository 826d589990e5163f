"""Every sample graph through the Python API equals `fusejit run --save-dir` bit for bit (CPU)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import fusejit
from conftest import SAMPLES, bits, fusejit_bin, input_ranges, random_inputs, read_npy_bytes, small_graph


@pytest.mark.parametrize("special", [False, True], ids=["plain", "special"])
@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_matches_cli(path, special, tmp_path, rng):
    g = small_graph(path)
    inputs = random_inputs(g, rng, input_ranges(path), special)
    args = [str(fusejit_bin()), "run", str(path), "--backend", "cpu", "--save-dir", str(tmp_path / "out"),
            "--repeats", "1", "--warmup", "0", "--no-check"]
    args += [f"--dim={d}={v}" for d, v in g.dims.items()]
    # The special-values variant also sets every float param to another value than its default.
    params = {p.name: p.default * 1.25 for p in g.params if special and p.dtype.startswith(("f", "bf"))}
    args += [f"--param={n}={v!r}" for n, v in params.items()]
    for name, a in inputs.items():
        f = tmp_path / f"{name}.npy"
        np.save(f, a.view(np.uint16) if a.dtype.name == "bfloat16" else a)
        args.append(f"--input={name}={f}")
    subprocess.run(args, check=True, capture_output=True, text=True)

    prog = fusejit.compile(g, backend="cpu")
    outs = prog(**inputs, **params)
    assert list(outs) == [t.name for t in g.outputs]
    for t in g.outputs:
        shape, data = read_npy_bytes(tmp_path / "out" / f"{t.name}.npy")
        got = outs[t.name]
        assert got.dtype == fusejit.numpy_dtype(t.dtype)
        assert got.shape == shape
        if t.dtype == "bf16":  # `fusejit run` saves bf16 widened to f32 (exact; ir/npy.h)
            got = got.astype(np.float32)
        assert bits(got) == data, f"{path.stem}: output {t.name} differs from `fusejit run`"


def test_an_ahead_of_time_folder_runs_on_the_cpu_path_with_backend_cpu(tmp_path):
    """`fusejit compile` writes a folder for a GPU; without one, load() says so and names
    backend="cpu", which runs the folder's graph on the CPU path (same bits as compile())."""
    path = next(p for p in SAMPLES if p.stem == "rmsnorm")
    folder = tmp_path / "aot"
    subprocess.run([str(fusejit_bin()), "compile", str(path), "--dim", "T=5", "--dim", "D=24", "--arch", "sm_90", "--fused-only",
                    "-o", str(folder)], check=True, capture_output=True)
    cpu = fusejit.load(folder, backend="cpu")
    assert cpu.backend == "cpu"
    if fusejit.compile(fusejit.Graph.parse("input x : f32[1]\ny = x * 2\noutput y\n")).backend == "cpu":
        with pytest.raises(fusejit.DriverError, match=r'fusejit.load needs a GPU to run the folder.s binaries: .*backend="cpu" runs'):
            fusejit.load(folder)
    ref = fusejit.compile(fusejit.Graph.load(str(path), {"T": 5, "D": 24}), backend="cpu")
    inputs = random_inputs(ref.graph, np.random.default_rng(0), special=True)
    got, want = cpu(**inputs), ref(**inputs)
    assert all(bits(got[k]) == bits(want[k]) for k in want)


def test_compile_to_dir_writes_the_folder_fusejit_compile_writes(tmp_path):
    """The wheel has no `fusejit` command: fusejit.compile_to_dir writes the same folder (NVRTC,
    no GPU), which load() takes."""
    path = next(p for p in SAMPLES if p.stem == "softmax")
    dims = {"N": 3, "C": 40}
    cli, py = tmp_path / "cli", tmp_path / "py"
    subprocess.run([str(fusejit_bin()), "compile", str(path), *[f"--dim={d}={v}" for d, v in dims.items()],
                    "--arch", "sm_80", "--fused-only", "-o", str(cli)], check=True, capture_output=True)
    kernels = fusejit.compile_to_dir(fusejit.Graph.load(str(path), dims), "sm_80", py, fused_only=True)
    names = sorted(f.name for f in cli.iterdir())
    assert sorted(f.name for f in py.iterdir()) == names
    assert sorted(k.name + ".cubin" for k in kernels) == sorted(n for n in names if n.endswith(".cubin"))
    for n in names:
        if n != "index.json":  # it names the graph file it was parsed from
            assert (py / n).read_bytes() == (cli / n).read_bytes(), n
    prog = fusejit.load(py, backend="cpu")
    x = np.random.default_rng(1).standard_normal((3, 40)).astype(np.float32)
    want = fusejit.compile(prog.graph, backend="cpu")(x=x)
    assert all(bits(prog(x=x)[k]) == bits(want[k]) for k in want)
    with pytest.raises(fusejit.UserError, match="invalid GPU architecture 'sm_9'"):
        fusejit.compile_to_dir(prog.graph, "sm_9", tmp_path / "bad")
    with pytest.raises(TypeError, match="arch: expected a str"):
        fusejit.compile_to_dir(prog.graph, 90, tmp_path / "bad")
