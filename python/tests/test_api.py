"""The Python API on the CPU path: graphs, compile, calls, params, dims, out=, in place, strided
views, bf16, errors, warnings and threads."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import fusejit
from conftest import ROOT, bits, random_inputs

AXPY = """graph axpy
dim N = 8
input x : f32[N]
input y : f32[N]
param a : f32 = 2.0
z = a * x + y
output z
"""

MATRIX = """graph scale_rows
dim R = 4
dim C = 6
input m : f32[R, C]
input s : f32[R, 1]
out = tanh(m) * s + 1
output out
"""


@pytest.fixture(scope="module")
def axpy():
    return fusejit.compile(fusejit.Graph.parse(AXPY), backend="cpu")


@pytest.fixture(scope="module")
def matrix():
    return fusejit.compile(fusejit.Graph.parse(MATRIX), backend="cpu")


def test_graph_info():
    g = fusejit.Graph.parse(AXPY, filename="axpy.txt")
    assert g.name == "axpy"
    assert [(t.name, t.dtype, t.shape, t.dim_names) for t in g.inputs] == [
        ("x", "f32", [8], ["N"]), ("y", "f32", [8], ["N"])]
    assert [(p.name, p.dtype, p.default) for p in g.params] == [("a", "f32", 2.0)]
    assert g.dims == {"N": 8}
    assert g.op_count == 2
    assert fusejit.Graph.parse(g.to_text()).to_text() == g.to_text()
    assert g.with_dims({"N": 3}).inputs[0].shape == [3]
    ops = [n.op for n in g.nodes]
    assert ops.count("mul") == 1 and ops.count("add") == 1
    assert [g.nodes[i].name for i in g.output_nodes] == ["z"]


def test_cache_functions_list_count_and_clear_the_folder_a_compile_wrote(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    g = fusejit.Graph.load(ROOT / "samples" / "graphs" / "x2x3.txt", dims={"N": 4})
    fusejit.compile(g, backend="cpu", cache_dir=cache, build_unfused=True)
    assert fusejit.cache_path(cache) == str(cache)
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(cache))
    assert fusejit.cache_path() == str(cache)
    s = fusejit.cache_stats(cache)
    assert s.path == str(cache) and s.enabled and s.disabled_reason == ""
    assert s.unusable_subfolders == []
    assert (s.entries, s.bytes, s.invalid) == (0, 0, 0)  # the CPU path writes host modules only
    entries = fusejit.cache_list(cache)
    assert s.host_modules == len(entries) >= 1 and s.host_bytes == sum(e.bytes for e in entries) > 0
    for e in entries:
        assert e.valid and e.problem == "" and e.target == "host" and len(e.key) == 32
        assert e.path.startswith(str(cache)) and os.path.getsize(e.path) == e.bytes and e.label
        assert "target='host'" in repr(e)
    # A damaged entry is listed and counted, not deleted by reading it.
    with open(entries[0].path, "r+b") as f:
        f.truncate(40)
    assert [e.problem for e in fusejit.cache_list(cache) if not e.valid] and fusejit.cache_stats().invalid == 1
    assert fusejit.cache_clear(cache) == len(entries)
    assert fusejit.cache_list(cache) == [] and fusejit.cache_stats(cache).host_modules == 0
    assert fusejit.cache_clear(cache) == 0
    with pytest.raises(fusejit.UserError, match="holds a NUL byte"):
        fusejit.cache_stats(str(cache) + "\0x")
    with pytest.raises(TypeError, match="cache_dir"):
        fusejit.cache_list(3)
    # A folder whose name is not UTF-8 comes back as os.fsdecode gives it; a disabled cache says so in its repr.
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xffcache")
    fusejit.compile(g, backend="cpu", cache_dir=odd)
    assert fusejit.cache_path(odd) == odd and fusejit.cache_stats(odd).path == odd
    assert all(e.path.startswith(odd) for e in fusejit.cache_list(odd)) and fusejit.cache_clear(odd) >= 1
    (tmp_path / "afile").write_text("x")
    s = fusejit.cache_stats(tmp_path / "afile")
    assert not s.enabled and "disabled: " in repr(s) and "is not a folder" in repr(s)
    with pytest.raises(fusejit.UserError, match="cache_dir: an empty path"):
        fusejit.cache_stats("")
    monkeypatch.delenv("FUSEJIT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    with pytest.raises(fusejit.UserError, match="FUSEJIT_CACHE_DIR"):
        fusejit.cache_path()


def test_folder_arguments_take_a_pathlike_and_refuse_a_nul(tmp_path):
    g = fusejit.Graph.load(ROOT / "samples" / "graphs" / "x2x3.txt", dims={"N": 4})
    prog = fusejit.compile(g, backend="cpu", cache_dir=tmp_path / "cache", dump_dir=tmp_path / "dump")
    assert (tmp_path / "dump" / "index.json").exists() and any((tmp_path / "cache").iterdir())
    np.testing.assert_array_equal(prog(x=np.ones(4, np.float32))["z"], np.full(4, 6, np.float32))
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "notes.txt").write_text("precious")
    with pytest.raises(fusejit.UserError, match="cache folder .* holds a NUL byte"):
        fusejit.compile(g, backend="cpu", cache_dir=str(victim) + "\0/cache")
    with pytest.raises(fusejit.UserError, match="holds a NUL byte"):
        fusejit.load(str(victim) + "\0/aot")
    assert (victim / "notes.txt").read_text() == "precious"
    # A name that is not UTF-8 (Python holds it as surrogate escapes) and a bytes path read as open() reads them.
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xffgraph.txt")
    with open(odd, "w") as f:
        f.write("graph g\ninput x : f32[2]\ny = x * 2\noutput y\n")
    assert fusejit.Graph.load(odd).name == "g" and fusejit.Graph.load(os.fsencode(odd)).name == "g"
    with pytest.raises(TypeError, match="path: expected a str, bytes or os.PathLike, got int"):
        fusejit.Graph.load(3)


def test_load_and_plan():
    path = ROOT / "samples" / "graphs" / "gpt2_gelu_tanh.txt"
    g = fusejit.Graph.load(str(path), dims={"T": 2})
    assert g.inputs[0].shape[0] == 2
    plan = g.plan()
    assert plan["fused"]["kernels"] == 1 and plan["unfused"]["kernels"] > 1
    assert plan["mode"] == "strict"
    assert g.plan(fast_math=True)["mode"] != "strict"


def test_program_info(axpy):
    assert axpy.backend == "cpu" and axpy.device == "host CPU"
    [k] = axpy.kernels
    assert k.name and k.cache in ("compiled", "memory", "disk") and k.compile_ms >= 0
    assert k.elements == 8 and k.read_bytes == 64 and k.write_bytes == 32
    assert k.name in axpy.cuda_source()
    assert all(u.cache == "not built" for u in axpy.unfused_kernels)
    assert "fusion group" in axpy.plan_text or "kernel" in axpy.plan_text


def test_unfused_source_once_built():
    g = fusejit.Graph.parse("input x : f32[4]\ny = exp(x) * 2\noutput y")
    p = fusejit.compile(g, backend="cpu")
    with pytest.raises(fusejit.UserError, match=re.escape('the unfused plan is not built yet')):
        p.cuda_source("unfused")
    p(np.ones(4, np.float32), plan="unfused")
    names = [k.name for k in p.unfused_kernels]
    assert len(names) == 2 and all(n and n in p.cuda_source("unfused") for n in names)
    built = fusejit.compile(g, backend="cpu", build_unfused=True)
    assert built.cuda_source("unfused") == p.cuda_source("unfused")


def test_call_params_and_defaults(axpy, rng):
    x, y = rng.standard_normal(8, dtype=np.float32), rng.standard_normal(8, dtype=np.float32)
    assert bits(axpy(x=x, y=y)["z"]) == bits(np.float32(2) * x + y)
    assert bits(axpy(x, y, a=-0.5)["z"]) == bits(np.float32(-0.5) * x + y)
    assert bits(axpy(x=x, y=y, a=np.float32(3))["z"]) == bits(np.float32(3) * x + y)
    assert bits(axpy(x=x, y=y, a=3)["z"]) == bits(np.float32(3) * x + y)


def test_dims_from_shapes(axpy, rng):
    for n in (1, 3, 100, 0):
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        z = axpy(x=x, y=y)["z"]
        assert z.shape == (n,) and bits(z) == bits(np.float32(2) * x + y)
    assert axpy.output_shapes(x=np.zeros(5, np.float32), y=np.zeros(5, np.float32)) == {"z": (5,)}


def test_out_and_in_place(axpy, rng):
    x, y = rng.standard_normal(8, dtype=np.float32), rng.standard_normal(8, dtype=np.float32)
    want = np.float32(2) * x + y
    z = np.full(8, np.nan, np.float32)
    r = axpy(x=x, y=y, out={"z": z})
    assert r["z"] is z and bits(z) == bits(want)
    y2 = y.copy()
    axpy(x=x, y=y2, out={"z": y2})  # in place: z overwrites y
    assert bits(y2) == bits(want)


def test_output_interleaved_with_an_input_without_sharing_a_byte(axpy, rng):
    # z into the second half of each row while x, the first half, is read (np.shares_memory is
    # False, np.may_share_memory True): it runs; one element further they share bytes: refused.
    h = rng.standard_normal((4, 16), dtype=np.float32)
    y = rng.standard_normal((4, 8), dtype=np.float32)
    g = fusejit.Graph.parse("dim N = 4\ninput x : f32[N, 8]\ninput y : f32[N, 8]\nz = 2 * x + y\noutput z\n")
    prog = fusejit.compile(g, backend="cpu")
    want = np.float32(2) * h[:, :8] + y
    assert not np.shares_memory(h[:, 8:], h[:, :8]) and np.may_share_memory(h[:, 8:], h[:, :8])
    prog(x=h[:, :8], y=y, out={"z": h[:, 8:]})
    assert bits(h[:, 8:]) == bits(want)
    with pytest.raises(fusejit.UserError, match="overlaps input 'x'"):
        prog(x=h[:, :8], y=y, out={"z": h[:, 7:15]})


def test_adam_in_place_matches_out_of_place(rng):
    g = fusejit.Graph.load(str(ROOT / "samples" / "graphs" / "adam_step.txt"), dims={"N": 1000})
    prog = fusejit.compile(g, backend="cpu")
    ins = random_inputs(g, rng, {"v": (0, 1)})
    want = prog(**ins)
    p, m, v = ins["p"].copy(), ins["m"].copy(), ins["v"].copy()
    prog(p=p, grad=ins["grad"], m=m, v=v, out={"p_out": p, "m_out": m, "v_out": v})
    for name, a in (("p_out", p), ("m_out", m), ("v_out", v)):
        assert bits(a) == bits(want[name])


def test_transposed_views_without_copy(matrix, rng):
    base = rng.standard_normal((6, 4), dtype=np.float32)
    m = base.T  # f32[4, 6], strides (1, 4) elements: read in place
    assert not m.flags.c_contiguous
    s = rng.standard_normal((4, 1), dtype=np.float32)
    want = matrix(m=np.ascontiguousarray(m), s=s)["out"]
    assert bits(matrix(m=m, s=s)["out"]) == bits(want)
    # A transposed output view: the kernel writes straight into the caller's buffer.
    buf = np.zeros((6, 4), np.float32)
    matrix(m=m, s=s, out={"out": buf.T})
    assert bits(buf.T) == bits(want)
    # A sliced input (every other column of a wider array).
    wide = rng.standard_normal((4, 12), dtype=np.float32)
    assert bits(matrix(m=wide[:, ::2], s=s)["out"]) == bits(matrix(m=wide[:, ::2].copy(), s=s)["out"])
    # Broadcast input through a stride-0 view.
    s_b = np.broadcast_to(np.float32(0.5), (4, 1))
    assert bits(matrix(m=m, s=s_b)["out"]) == bits(matrix(m=m, s=np.full((4, 1), 0.5, np.float32))["out"])


def test_bf16_with_ml_dtypes(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    g = fusejit.Graph.parse("dim N = 16\ninput x : bf16[N]\ny = x * 2 + 1\nz = cast(x, f32)\noutput y, z")
    prog = fusejit.compile(g, backend="cpu")
    x = rng.uniform(-100, 100, 16).astype(ml_dtypes.bfloat16)
    x[:3] = [np.nan, -0.0, np.inf]
    r = prog(x=x)
    assert r["y"].dtype == ml_dtypes.bfloat16
    want = (x.astype(np.float32) * 2).astype(ml_dtypes.bfloat16).astype(np.float32) + 1
    assert bits(r["y"]) == bits(want.astype(ml_dtypes.bfloat16))
    assert bits(r["z"]) == bits(x.astype(np.float32))
    xt = np.stack([x, x]).T[:, 0]  # a strided bf16 view
    assert bits(prog(x=xt)["y"]) == bits(r["y"])


def test_errors(axpy):
    x = np.zeros(8, np.float32)
    with pytest.raises(fusejit.UserError, match="input 'x'.*f64") as e:
        axpy(x=np.zeros(8), y=x)
    assert e.value.kind == "user" and isinstance(e.value, ValueError)
    with pytest.raises(fusejit.UserError, match="'y'"):
        axpy(x=x, y=np.zeros(9, np.float32))
    with pytest.raises(TypeError, match="missing input.*y"):
        axpy(x=x)
    # A param given positionally: params go by keyword.
    with pytest.raises(TypeError, match=r"3 positional inputs given; the graph has 2: x, y \(params go by keyword: a=\.\.\.\)"):
        axpy(x, x, 2.0)
    with pytest.raises(TypeError, match=r"3 positional inputs given; the graph has 2: x, y$"):
        axpy(x, x, x)  # an array: no param hint
    # An input named like the call's own keywords (out=, stream=, plan=) goes positionally.
    named_out = fusejit.compile(fusejit.Graph.parse("input out : f32[8]\ny = out * 2\noutput y\n"))
    with pytest.raises(TypeError, match=r"missing input\(s\): out \(out: the call's own keyword; pass such an "
                                        r"input positionally\)"):
        named_out(out=x)
    assert list(named_out(x)["y"]) == [0.0] * 8
    with pytest.raises(TypeError, match=r"'q' is neither an input nor a param of the graph \(inputs: out;"):
        named_out(x, q=1)  # an unnamed graph: not "of graph ''"
    with pytest.raises(TypeError, match="neither an input nor a param"):
        axpy(x=x, y=x, b=1.0)
    with pytest.raises(TypeError, match="param 'a': expected a bool, int or float, got str"):
        axpy(x=x, y=x, a="2")
    with pytest.raises(TypeError, match="expected an array"):
        axpy(x=[0.0] * 8, y=x)
    with pytest.raises(fusejit.UserError, match=r"negative stride .*np\.ascontiguousarray"):
        axpy(x=x[::-1], y=x)
    # A stride on a dim of one element means nothing: NumPy's x[::-1] of one element has -4 bytes.
    col = np.arange(4, dtype=np.float32).reshape(4, 1)
    assert col[:, ::-1].strides[1] < 0
    np.testing.assert_array_equal(fusejit.fuse(lambda a: a * 2)(col[:, ::-1]), col * 2)
    with pytest.raises(fusejit.UserError, match="read-only"):
        axpy(x=x, y=x, out={"z": np.broadcast_to(np.float32(0), (8,))})
    with pytest.raises(TypeError, match="no output named"):
        axpy(x=x, y=x, out={"w": x})


def test_error_location():
    with pytest.raises(fusejit.UserError) as e:
        fusejit.Graph.parse("input x : f32[4]\ny = frobnicate(x)\noutput y\n", filename="bad.txt")
    err = e.value
    assert (err.file, err.line) == ("bad.txt", 2) and err.column > 0
    assert err.location == f"bad.txt:2:{err.column}"
    assert str(err).startswith(f"bad.txt:2:{err.column}: error:") and "frobnicate" in err.message
    with pytest.raises(fusejit.UserError, match="cannot|no such|missing|not"):
        fusejit.Graph.load(str(ROOT / "no-such-graph.txt"))


def test_messages_quoting_a_nul_or_bytes_that_are_not_utf8_come_whole(tmp_path):
    # A NUL in a value used to cut the message there (what() is a C string), and a file name that
    # is not UTF-8 to end in SystemError (the message could not become a str): escaped as \\xNN.
    g = fusejit.Graph.parse(AXPY)
    with pytest.raises(fusejit.UserError) as e:
        fusejit.compile(g, arch="sm_90\x00")
    assert "'sm_90\\x00': expected sm_XY" in e.value.message
    bad = os.path.join(os.fsencode(tmp_path), b"bad\xff.txt")
    with open(bad, "w") as f:
        f.write("input x : f32[4]\ny = tahn(x)\noutput y\n")
    for path in (bad, os.fsdecode(bad)):
        with pytest.raises(fusejit.UserError) as e:
            fusejit.Graph.load(path)
        assert e.value.file.endswith("bad\\xff.txt") and e.value.line == 2 and "tahn" in e.value.message
    (tmp_path / "index.json").write_bytes(b'{"format": "fusejit-aot", "x": "\xff"}')
    with pytest.raises(fusejit.UserError, match="not valid JSON"):
        fusejit.load(str(tmp_path))


def test_warnings_go_to_python():
    g = fusejit.Graph.parse(AXPY)
    with pytest.warns(fusejit.FusejitWarning, match="arch"):
        fusejit.compile(g, backend="cpu", arch="sm_90")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(fusejit.FusejitWarning):
            fusejit.compile(g, backend="cpu", arch="sm_90")


def test_warnings_name_the_callers_line():
    # Warnings point at the user's line (the first frame outside the package), so filters by module
    # and "which line did this" work: parse and build warned at "sys:1" (a stacklevel past the caller).
    unused = "input x : f32[3]\ninput z : f32[3]\ny = x * 2\noutput y\n"
    b = fusejit.GraphBuilder("g")
    b.output("y", b.input("x", "f32", [3]) * 2)
    b.input("z", "f32", [3])
    g = fusejit.Graph.parse(AXPY)
    with warnings.catch_warnings(record=True) as w1:
        warnings.simplefilter("always")
        fusejit.Graph.parse(unused, filename="w.txt"); line1 = inspect.currentframe().f_lineno  # noqa: E702
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        b.build(); line2 = inspect.currentframe().f_lineno  # noqa: E702
    with warnings.catch_warnings(record=True) as w3:
        warnings.simplefilter("always")
        fusejit.compile(g, backend="cpu", arch="sm_90"); line3 = inspect.currentframe().f_lineno  # noqa: E702
    for w, line in [(w1, line1), (w2, line2), (w3, line3)]:
        assert w and (w[0].filename, w[0].lineno) == (__file__, line), [(x.filename, x.lineno, str(x.message)) for x in w]


SPECIALIZED = """graph s1
dim S = 8
dim T = 8
dim D = 16
input a : f32[S, D]
input b : f32[T, D]
ya = a * 1.5
y = ya + b
output y
output ya
"""


def damage_cache_entries(cache):
    for f in cache.glob("*/*.fjk"):
        b = bytearray(f.read_bytes())
        b[-1] ^= 0xFF
        f.write_bytes(bytes(b))


def test_a_warning_from_a_compile_worker_during_a_call_neither_hangs_nor_is_lost(tmp_path):
    # A call at new dims (S = 1 meets T = 5) compiles a specialization on worker threads, which
    # warn about the damaged cache entries: the call once held the GIL there, and the warning
    # handler waited for it forever. In a subprocess, so a hang fails the test instead of the run.
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = f"""
import sys, warnings, numpy as np, fusejit
p = fusejit.compile(fusejit.Graph.parse({SPECIALIZED!r}), backend="cpu", cache_dir={str(cache)!r})
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = p(a=np.ones((1, 16), np.float32), b=np.ones((5, 16), np.float32))
print(r["y"].shape, sum("unusable" in str(x.message) for x in w), {{x.filename for x in w}})
"""
    run = [sys.executable, "-c", script]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(run, check=True, timeout=120, env=env, capture_output=True)  # fills the cache
    damage_cache_entries(cache)
    out = subprocess.run(run, check=True, timeout=120, env=env, capture_output=True, text=True).stdout.split()
    assert out[:2] == ["(5,", "16)"] and int(out[2]) >= 1  # the specialization's entry warned
    assert out[3:] == ["{'<string>'}"]  # at the line of the call, also from a worker (it was "sys")
    # With warnings as errors, the worker's warning is raised by the call that compiled.
    damage_cache_entries(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fused program's own entries
        p = fusejit.compile(fusejit.Graph.parse(SPECIALIZED), backend="cpu", cache_dir=str(cache))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(fusejit.FusejitWarning, match="unusable"):
            p(a=np.ones((1, 16), np.float32), b=np.ones((5, 16), np.float32))
        fusejit.Graph.parse(AXPY)  # nothing left pending for a later call


def test_a_compile_workers_warning_error_is_raised_by_its_call_not_another_threads(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    fusejit.compile(fusejit.Graph.parse(SPECIALIZED), backend="cpu", cache_dir=str(cache), build_unfused=True)
    damage_cache_entries(cache)
    other_raised, stop = [], threading.Event()

    def parse_loop():  # another thread's calls, unrelated to the compile
        while not stop.is_set():
            try:
                fusejit.Graph.parse(AXPY)
            except fusejit.FusejitWarning as e:  # must not receive the compile's warning
                other_raised.append(e)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = threading.Thread(target=parse_loop)
        t.start()
        try:
            with pytest.raises(fusejit.FusejitWarning, match="unusable"):
                fusejit.compile(fusejit.Graph.parse(SPECIALIZED), backend="cpu", cache_dir=str(cache),
                                build_unfused=True)
        finally:
            stop.set()
            t.join()
    assert other_raised == []


def test_a_warning_turned_error_in_output_shapes_is_raised_there_not_later():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = fusejit.compile(fusejit.Graph.parse(SPECIALIZED), backend="cpu", device=1, disk_cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(fusejit.FusejitWarning, match="device 1"):  # compiling the specialization warns
            p.output_shapes(a=np.ones((1, 16), np.float32), b=np.ones((5, 16), np.float32))
        fusejit.Graph.parse(AXPY)


def test_threads_share_one_program(matrix):
    rng = np.random.default_rng(7)
    cases = [(rng.standard_normal((r, 5), dtype=np.float32), rng.standard_normal((r, 1), dtype=np.float32))
             for r in range(1, 17)]
    want = [bits(matrix(m=m, s=s)["out"]) for m, s in cases]
    errors = []

    def work(k):
        try:
            for _ in range(20):
                m, s = cases[k]
                assert bits(matrix(m=m, s=s)["out"]) == want[k]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    prog = fusejit.compile(fusejit.Graph.parse(AXPY), backend="cpu")
    x, y = torch.randn(8), torch.randn(8)
    z = prog(x=x, y=y)["z"]
    assert isinstance(z, torch.Tensor) and torch.equal(z, 2 * x + y)


def test_an_array_type_is_known_by_its_bases_so_a_subclass_defined_elsewhere_too(monkeypatch):
    # A subclass of torch.Tensor defined outside torch (torchao's, a user's) is PyTorch's array, for
    # the argument checks and fuse's write-back alike: one rule (by the class's bases) serves both.
    # Before, the argument checks looked at the class's module first and took it for no array.
    import types
    from fusejit import _fuse
    fake = types.ModuleType("torch")
    fake.Tensor = type("Tensor", (), {"__module__": "torch"})
    monkeypatch.setitem(sys.modules, "torch", fake)
    mine = type("MyTensor", (fake.Tensor,), {})  # defined in this module
    assert fusejit._framework(mine()) == "torch" and _fuse._updates_in_place(mine())
    assert fusejit._framework(fake.Tensor()) == "torch"
    other = type("dtype", (), {"__module__": "torch"})  # torch.float32's type: no array
    assert fusejit._framework(other()) == "" and not _fuse._updates_in_place(other())
    assert not _fuse._updates_in_place(np.float32(1)) and _fuse._updates_in_place(np.zeros(2))


def test_a_torch_tensor_that_requires_grad_is_refused_saying_so(monkeypatch):
    # PyTorch's __dlpack__ refuses it; nanobind then said "not readable as a tensor ... pass a
    # NumPy array or a PyTorch or CuPy tensor" of both the input and the output. A stand-in for
    # torch (none here) that refuses as torch's does.
    import types
    fake = types.ModuleType("torch")

    class Tensor:
        __module__ = "torch"
        requires_grad, is_cuda, device, shape = True, False, "cpu", (8,)

        def __dlpack__(self, *args, **kwargs):
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")

        def __dlpack_device__(self):
            return (1, 0)

    fake.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", fake)
    prog = fusejit.compile(fusejit.Graph.parse(AXPY), backend="cpu")
    with pytest.raises(TypeError, match=r"^input 'x': a PyTorch tensor that requires grad: .* pass t\.detach\(\)"):
        prog(x=Tensor(), y=np.zeros(8, np.float32), out={"z": np.empty(8, np.float32)})


def test_the_package_imports_and_runs_from_a_folder_whose_name_is_no_utf8(tmp_path):
    # A folder name of bytes that are no UTF-8 (Python's lone surrogates): the extension read the
    # package folder as UTF-8 at import, and the import failed ("std::bad_cast").
    import shutil
    folder = os.fsencode(tmp_path) + b"/pkg_\xff"
    os.makedirs(folder)
    shutil.copytree(os.path.dirname(fusejit.__file__), os.fsdecode(folder + b"/fusejit"))
    env = dict(os.environb)
    env[b"PYTHONPATH"], env[b"FUSEJIT_CACHE_DIR"] = folder, os.fsencode(tmp_path / "cache")
    code = (b"import os, fusejit, numpy as np; "
            b"print(os.fsencode(fusejit.__file__), fusejit.fuse(lambda x: x * 2)(np.ones(2, np.float32)))")
    r = subprocess.run([os.fsencode(sys.executable), b"-c", code], env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.strip() == repr(folder + b"/fusejit/__init__.py").encode() + b" [2. 2.]"


def test_gil_released_while_compiling():
    """A Python thread keeps running while another compiles (the host compiler takes ~1 s): with
    the GIL held it would stall for the whole compile."""
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.2)
        c0, t0 = count[0], time.perf_counter()
        time.sleep(0.2)
        rate = (count[0] - c0) / (time.perf_counter() - t0)  # increments per second, GIL shared
        text = f"dim N = 8\ninput x : f32[N]\ny = tanh(x * {time.time_ns() % 99991}.5) + exp(x)\noutput y"
        c1, t1 = count[0], time.perf_counter()
        fusejit.compile(fusejit.Graph.parse(text), backend="cpu", disk_cache=False)
        during, secs = count[0] - c1, time.perf_counter() - t1
    finally:
        stop.set()
        t.join()
    assert secs > 0.1, "compile too quick to tell"
    assert during > 0.2 * rate * secs, (during, rate, secs)


def test_row_split_gives_the_same_bits(rng):
    # Softmax over 3 rows of 20,000: fusejit's rule keeps one block per row; row_split=3 forces
    # the split (5 launches on the CPU path too); the bits are the same.
    g = fusejit.Graph.parse("input x : f32[3, 20000]\ny = softmax(x, -1)\ns = sum(x, -1)\noutput y, s\n")
    x = rng.standard_normal((3, 20000), dtype=np.float32)
    whole = fusejit.compile(g, backend="cpu")(x=x)
    split = fusejit.compile(g, backend="cpu", row_split=3)(x=x)
    for name in ("y", "s"):
        assert bits(split[name]) == bits(whole[name])
    # compile and Graph.plan check row_split alike: >= 0, an int (not a bool), below 2^63.
    for call in (lambda v: fusejit.compile(g, backend="cpu", row_split=v), lambda v: g.plan(row_split=v)):
        with pytest.raises(fusejit.UserError, match="row_split -1: must be >= 0"):
            call(-1)
        with pytest.raises(TypeError, match="row_split must be an int"):
            call(True)
        with pytest.raises(ValueError, match="row_split 1180591620717411303424 is outside int64"):
            call(2**70)
    assert g.plan(row_split=3)["fused"]["groups"][0]["blocks_per_row"] == 3


def test_row_cache_off_gives_the_same_bits(rng):
    # LayerNorm over rows of 2,000 f32: x stays on chip (3 passes read it) unless row_cache=False.
    g = fusejit.Graph.parse("input x : f32[4, 2000]\nm = mean(x, -1, keepdim)\nd = x - m\n"
                            "v = mean(d * d, -1, keepdim)\ny = d * rsqrt(v + 1e-5)\noutput y\n")
    assert "the row kept on chip (8000 B" in g.plan()["fused"]["groups"][0]["note"]
    assert g.plan()["fused"]["groups"][0]["row_cache_bytes"] == 8000
    # row_cache_limit lowers the limit: the 8,000 B rows no longer fit 4,096 B (a NumPy integer too).
    assert g.plan(row_cache_limit=4096)["fused"]["groups"][0]["row_cache_bytes"] == 0
    assert g.plan(row_cache_limit=np.int64(4096))["fused"]["groups"][0]["row_cache_bytes"] == 0
    assert g.plan(row_cache=np.False_)["fused"]["groups"][0]["row_cache_bytes"] == 0
    # As a GPU runs it: rows of 2,000 f32 (8,000 B) are short rows there, re-read from L1/L2, not on chip.
    gpu = g.plan(arch="sm_90")["fused"]["groups"][0]
    assert gpu["row_cache_bytes"] == 0 and "a short row" in gpu["note"]
    with pytest.raises(fusejit.UserError, match="arch sm_70: fusejit knows the shared memory per block of sm_75"):
        g.plan(arch="sm_70")
    for call in (lambda v: fusejit.compile(g, backend="cpu", row_cache_limit=v),
                 lambda v: g.plan(row_cache_limit=v)):
        with pytest.raises(fusejit.UserError, match="row_cache_limit -1: must be >= 0"):
            call(-1)
        with pytest.raises(TypeError, match="row_cache_limit must be an int"):
            call(1.5)
        with pytest.raises(TypeError, match="row_cache_limit must be an int"):
            call(np.True_)
        with pytest.raises(ValueError, match="row_cache_limit 1180591620717411303424 is outside int64"):
            call(2**70)
    x = rng.standard_normal((4, 2000), dtype=np.float32)
    on = fusejit.compile(g, backend="cpu")(x=x)
    limited = fusejit.compile(g, backend="cpu", row_cache_limit=4096)(x=x)
    assert bits(on["y"]) == bits(limited["y"])
    prog = fusejit.compile(g, backend="cpu", row_cache=False)
    off = prog(x=x)
    assert bits(on["y"]) == bits(off["y"])
    # Its kernel counts the two later passes' reads; plan_text says the notes follow the rules.
    assert prog.kernels[0].read_bytes == 3 * x.nbytes
    assert "each reading x from memory (the row cache is off)" in prog.plan_text
    assert g.plan(row_cache=False)["fused"]["groups"][0]["reread_bytes"] == 2 * x.nbytes
    for call in (lambda v: fusejit.compile(g, backend="cpu", row_cache=v), lambda v: g.plan(row_cache=v)):
        with pytest.raises(TypeError, match="row_cache must be True or False, not 0"):
            call(0)
        for array in (np.array([True]), np.array([True, False])):
            with pytest.raises(TypeError, match="row_cache must be True or False, not array"):
                call(array)
    assert g.plan(row_cache=np.array(False))["fused"]["groups"][0]["row_cache_bytes"] == 0  # 0-d


def test_bool_inputs_read_any_nonzero_byte_as_true():
    """A bool array viewed from other bytes (2, 255) reads as NumPy reads it: nonzero is true, on
    every path (vector loads, strided views, fused and unfused)."""
    raw = np.tile(np.array([2, 0, 1, 255, 0, 7, 1, 128], np.uint8), 33)
    b = raw.view(np.bool_)
    x = np.linspace(-3, 3, b.size, dtype=np.float32)
    prog = fusejit.compile(fusejit.Graph.parse(
        "dim N = 8\ninput b : bool[N]\ninput x : f32[N]\nc = sum(cast(b, i32))\nw = where(b, x, -x)\n"
        "n = logical_not(b)\nf = cast(b, f32) + x\noutput c, w, n, f\n"), backend="cpu")
    truth = raw != 0
    for plan in ("fused", "unfused"):
        for view_b, view_x, t in ((b, x, truth), (b[::3], x[::3], truth[::3])):
            out = prog(b=view_b, x=view_x, plan=plan)
            assert out["c"] == t.sum()
            assert bits(out["w"]) == bits(np.where(t, view_x, -view_x))
            assert bits(out["n"]) == bits(~t)
            assert bits(out["f"]) == bits(t.astype(np.float32) + view_x)


def test_option_messages_name_the_python_keywords():
    g = fusejit.Graph.parse("input x : f32[4]\ny = x * 2\noutput y\n")
    with pytest.raises(fusejit.UserError, match=r"^error: row_split -1: must be >= 0"):
        g.plan(row_split=-1)
    with pytest.raises(fusejit.UserError, match=r"^error: row_split -1: must be >= 0"):
        fusejit.compile(g, backend="cpu", row_split=-1)
    with pytest.raises(fusejit.UserError, match=r"^error: arch: invalid GPU architecture 'sm_1'"):
        fusejit.compile(g, backend="cpu", arch="sm_1")


def test_argument_types_are_named_not_nanobinds_signatures():
    g = fusejit.Graph.parse("input x : f32[4]\ny = x * 2\noutput y\n")
    for kw, says in (({"fast_math": "yes"}, "fast_math: expected True or False, got 'yes'"),
                     ({"disk_cache": 1}, "disk_cache: expected True or False, got 1"),
                     ({"build_unfused": None}, "build_unfused: expected True or False, got None"),
                     ({"arch": 90}, "arch: expected a str, got int"), ({"backend": None}, "backend: expected a str"),
                     ({"nvrtc_options": "--maxrregcount=32"}, "nvrtc_options: expected a list of str"),
                     ({"device": 1.0}, "device: expected a CUDA device ordinal")):
        with pytest.raises(TypeError, match=re.escape(says)):
            fusejit.compile(g, **kw)
    with pytest.raises(TypeError, match="graph: expected a fusejit.Graph, got str"):
        fusejit.compile("input x : f32[4]")
    for bad in (None, {"--x": 1}, 3):
        with pytest.raises(TypeError, match="nvrtc_options: expected a list of str"):
            fusejit.compile(g, nvrtc_options=bad)
    with pytest.raises(fusejit.UserError, match="a CUDA device ordinal is 0 or more"):  # an int, out of range
        fusejit.compile(g, device=2**70)
    with pytest.raises(fusejit.UserError, match="cache_dir: an empty path; pass None for the default"):
        fusejit.compile(g, cache_dir="")
    with pytest.raises(TypeError, match="arch: expected a str"):
        g.plan(arch=b"sm_90")
    with pytest.raises(fusejit.UserError, match="arch: an empty name"):
        g.plan(arch="")
    assert fusejit.compile(g, backend="cpu", fast_math=np.bool_(False), device=np.int64(0)).fast_math is False
    # An array fusejit has no dtype for is named as NumPy names it; bf16 bits held as uint16 say how to pass them.
    prog = fusejit.compile(g, backend="cpu")
    with pytest.raises(fusejit.UserError, match=re.escape("input 'x': unsupported element type uint16; fusejit takes")):
        prog(x=np.ones(4, np.uint16))
    with pytest.raises(fusejit.UserError, match=re.escape("a.view(ml_dtypes.bfloat16)")):
        prog(x=np.ones(4, np.uint16))
    with pytest.raises(fusejit.UserError, match="unsupported element type int16;"):
        prog(x=np.ones(4, np.int16))
    with pytest.raises(TypeError, match=re.escape("got memoryview; pass np.asarray(...) of it (no copy)")):
        prog(x=memoryview(np.ones(4, np.float32)))
    with pytest.raises(TypeError, match=re.escape("got bytes; pass np.frombuffer(it, dtype)")):
        prog(x=bytes(16))


def test_param_values_follow_the_fit_rule_of_defaults():
    # 300 for a u8 param wrapped to 44, NaN for an i32 became 0, 1e5 for an f16 inf (hostile pass).
    g = fusejit.Graph.parse("input x : u8[2]\nparam p : u8 = 1\nparam h : f16 = 1.0\nparam i : i32 = 1\n"
                            "y = x + p\nz = cast(x, f16) * h + cast(i, f16)\noutput y, z\n")
    prog = fusejit.compile(g)
    x = np.zeros(2, np.uint8)
    for kw, says in (({"p": 300}, "p=300: does not fit u8, the dtype of param 'p' (range 0 to 255"),
                     ({"p": -1}, "does not fit u8"), ({"h": 1e5}, "it would overflow to inf"),
                     ({"i": float("nan")}, "i=nan: does not fit i32"), ({"i": 1e10}, "does not fit i32")):
        with pytest.raises(fusejit.UserError, match=re.escape(says)):
            prog(x=x, **kw)
    with pytest.raises(TypeError, match=re.escape("param 'p': expected a bool, int or float, got ndarray of shape (1,) "
                                                  "(a NumPy scalar or 0-d array is taken)")):
        prog(x=x, p=np.array([2.0]))
    with pytest.raises(TypeError, match=r"param 'p': expected a bool, int or float, got type$"):
        prog(x=x, p=np.float32)  # a class: its ndim is a descriptor (it escaped as std::bad_cast)
    assert list(prog(x=x, p=np.uint8(255), h=np.float16(np.inf), i=np.array(-7))["y"]) == [255, 255]
    # An int past int64 is refused, saying how a float param takes it.
    with pytest.raises(fusejit.UserError, match=re.escape("param 'h': 18446744073709551616 is outside int64 "
                                                          "(integers are held in int64; for a float param pass float(v))")):
        prog(x=x, h=2**64)


def test_big_endian_arrays_are_refused_naming_the_tensor():
    prog = fusejit.compile(fusejit.Graph.parse("input x : f32[3]\ny = x * 2\noutput y\n"))
    with pytest.raises(fusejit.UserError, match=r"input 'x': big-endian data \('>f4'\) is not supported; "
                                                r"convert it with .astype\('<f4'\)"):
        prog(x=np.array([1, 2, 3], ">f4"))
    # An output is not told to convert (a converted copy would take the results, not the array).
    with pytest.raises(fusejit.UserError, match=r"output 'y': big-endian data \('>f4'\) is not supported; pass an "
                                                r"array of dtype '<f4' for the results"):
        prog(x=np.array([1, 2, 3], "<f4"), out={"y": np.zeros(3, ">f4")})
    # bfloat16 too: its bytes swapped would pass as bf16 bits and read as other numbers.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    hb = fusejit.compile(fusejit.Graph.parse("input x : bf16[4]\ny = x * 2\noutput y\n"))
    big = np.array([1, 2, 3, 4], dtype=ml_dtypes.bfloat16).astype(np.dtype(ml_dtypes.bfloat16).newbyteorder(">"))
    with pytest.raises(fusejit.UserError, match=r"input 'x': big-endian data .* convert it with \.astype\(ml_dtypes\.bfloat16\)"):
        hb(x=big)
    with pytest.raises(fusejit.UserError, match=r"output 'y': big-endian data \('bfloat16, >V2'\) .* of dtype "
                                                r"ml_dtypes.bfloat16"):
        hb(x=big.astype(ml_dtypes.bfloat16), out={"y": big.copy()})


def test_strides_that_are_not_whole_elements_are_refused_naming_the_tensor():
    prog = fusejit.compile(fusejit.Graph.parse("input x : f32[4, 4]\ny = x * 2\noutput y\n"))
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.uint8).view(np.float32), (4, 4), (6, 4))
    with pytest.raises(fusejit.UserError, match=r"input 'x': strides \(6, 4\) bytes are not multiples of its item size 4"):
        prog(x=odd)
    with pytest.raises(fusejit.UserError, match="output 'y': strides"):
        prog(x=np.ones((4, 4), np.float32), out={"y": odd})


def test_checks_hold_on_calls_that_meet_warm_caches(axpy):
    # A call's fast path (NumPy arrays of a plain dtype, every input and output given) must leave
    # every check to the full path: each error twice, after calls that warmed the caches.
    x, z = np.zeros(8, np.float32), np.zeros(8, np.float32)
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.uint8).view(np.float32), (8,), (6,))
    bad = [(TypeError, "input 'x': expected an array", dict(x=[0.0] * 8, y=x)),
           (fusejit.UserError, "input 'x': strides", dict(x=odd, y=x, out={"z": z})),
           (fusejit.UserError, "input 'x': big-endian", dict(x=x.astype(">f4"), y=x, out={"z": z})),
           (fusejit.UserError, "output 'z': the array is read-only",
            dict(x=x, y=x, out={"z": np.broadcast_to(np.float32(0), (8,))})),
           (fusejit.UserError, "output 'z': strides", dict(x=x, y=x, out={"z": odd})),
           (TypeError, "output 'z': expected an array .* got NoneType", dict(x=x, y=x, out={"z": None})),
           (TypeError, "missing input", dict(x=x, a=1.0)),
           (TypeError, "neither an input nor a param", dict(x=x, y=x, q=1.0, out={"z": z}))]
    for _ in range(2):
        axpy(x=x, y=x, out={"z": z})
        axpy(x, x, out={"z": z})
        for exc, says, kw in bad:
            with pytest.raises(exc, match=says):
                axpy(**kw)
    # `out` may be any mapping; an output it does not name is allocated.
    import types
    r = axpy(x=x + 1, y=x, out=types.MappingProxyType({"z": z}))
    assert r["z"] is z and list(z) == [2.0] * 8
    assert axpy(x=x + 1, y=x, out={})["z"] is not z


def test_bench_python_call_runs():
    # bench/python_call.py (per-call cost of the Python layer): a smoke run; timings not asserted.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "python_call.py"), "--calls", "3", "--repeats", "1"],
                         check=True, timeout=120, env=env, capture_output=True, text=True)
    assert res.stdout.count("µs/call") == 11, res.stdout
    for bad in (["--calls", "99999999999999999999"], ["--repeats", "0"]):  # refused, not run for hours
        res = subprocess.run([sys.executable, str(ROOT / "bench" / "python_call.py"), *bad], timeout=120, env=env,
                             capture_output=True, text=True)
        assert res.returncode == 2 and "--calls must be 1 to 10^7" in res.stderr, res.stderr


def test_bench_peers_refuses_bad_arguments_before_any_gpu_work():
    # A bad value failed each graph in turn after PyTorch and the GPU were set up; a graph file that
    # does not parse printed a traceback. Neither needs a GPU or PyTorch to say so.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    peers = [sys.executable, str(ROOT / "bench" / "peers.py")]
    for bad, says in ((["--repeats", "0"], "--repeats must be at least 1"), (["--budget-s", "-1"], "--budget-s at least 0"),
                      (["--dim", "T"], "--dim T: expected NAME=VALUE"), (["--dim", "T=abc"], "--dim T=abc: expected")):
        res = subprocess.run(peers + bad, timeout=120, env=env, capture_output=True, text=True)
        assert res.returncode == 2 and says in res.stderr, res.stderr
    res = subprocess.run(peers + ["--print-translation", str(ROOT / "README.md")], timeout=120, env=env,
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("peers: ") and "Traceback" not in res.stderr, res.stderr


def test_out_as_a_list_in_output_order_and_bad_out_or_dtype_are_clear_errors():
    g = fusejit.Graph.parse("graph t\ninput x : f32[4]\ny = x * 2\nz = x + 1\noutput y, z\n")
    p = fusejit.compile(g)
    x = np.arange(4, dtype=np.float32)
    y, z = np.zeros(4, np.float32), np.zeros(4, np.float32)
    r = p(x=x, out=[y, z])
    assert r["y"] is y and r["z"] is z and y.tolist() == [0, 2, 4, 6] and z.tolist() == [1, 2, 3, 4]
    assert p(x=x, out=(y, z))["z"] is z
    assert p(x=x, out=[("z", z)])["z"] is z  # (name, array) pairs, as dict() reads them
    with pytest.raises(TypeError, match=r"out: 1 array\(s\) for 2 output\(s\) \(y, z\)"):
        p(x=x, out=[y])
    with pytest.raises(TypeError, match="out: expected a dict"):
        p(x=x, out=3)
    # A bare array (NumPy's out= habit) is the output of a one-output program (a new user's wish);
    # for more it is a TypeError saying how to write them, not NumPy's "truth value is ambiguous",
    # and never ignored (an empty one read as no outputs).
    for bad in [np.zeros(4, np.float32), np.zeros(1, np.float32), np.zeros(0, np.float32), np.zeros((2, 2))]:
        with pytest.raises(TypeError, match=r"got ndarray \(the program has 2 outputs: out=\{'y': y, \.\.\.\} or one"):
            p(x=x, out=bad)
    one = fusejit.compile(fusejit.Graph.parse("graph g\ninput x : f32[4]\ny = x * 2\noutput y\n"))
    y = np.zeros(4, np.float32)
    assert one(x, out=y)["y"] is y and y.tolist() == [0, 2, 4, 6]
    with pytest.raises(fusejit.UserError, match="shape"):
        one(x, out=np.zeros(3, np.float32))  # checked as out=[y] is
    with pytest.raises(TypeError, match=r"out: 0 array\(s\) for 2 output\(s\)"):
        p(x=x, out=[])
    assert p(x=x, out={})["y"].tolist() == [0, 2, 4, 6]  # an empty mapping gives none: all allocated
    # Options of the wrong type are named, not nanobind's message about the extension's signature.
    with pytest.raises(TypeError, match=r'plan: expected "fused" or "unfused", got NoneType'):
        p(x=x, plan=None)
    for bad_device in (True, False):  # an int to nanobind: device=True was GPU 1
        with pytest.raises(TypeError, match=f"device: expected a CUDA device ordinal \\(an int\\), got {bad_device}"):
            fusejit.compile(fusejit.Graph.parse(AXPY), device=bad_device)
        with pytest.raises(TypeError, match="device: expected a CUDA device ordinal"):
            fusejit.load("/nonexistent", device=bad_device)
    for stream in ["abc", -1, 2**64, 1.5, True, False]:  # a bool is an int to nanobind: True was stream 1
        with pytest.raises(TypeError, match=r"stream: expected a CUDA stream handle \(an int in \[0, 2\^64\)"):
            p(x=x, stream=stream)
    for bad in [np.array([1, 2, 3, 4], dtype=object), np.zeros(4, np.complex64), np.array(["a"] * 4),
                np.zeros(4, np.longdouble)]:
        with pytest.raises(fusejit.UserError, match="input 'x': NumPy dtype .* has no fusejit dtype"):
            p(x=bad)
        with pytest.raises(fusejit.UserError, match="output 'y': NumPy dtype .* has no fusejit dtype"):
            p(x=x, out={"y": np.zeros(4, dtype=bad.dtype)})


def test_daemon_threads_inside_calls_at_exit_end_with_the_process(tmp_path):
    # Pythons before 3.14 end a thread that takes the GIL back during finalisation with pthread_exit,
    # whose unwind through a C++ call was std::terminate: daemon threads in a loop of calls aborted
    # the process at exit (rc 134). Such threads now wait for the process to end; a handler that
    # atexit runs after fusejit's (registered before the import) still calls fusejit, also from a
    # thread it starts, as does one that runs before it. In a subprocess, so an abort or hang
    # fails the test, not the run.
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = f"""
import atexit, threading, time
import numpy as np
late = []
def late_handler():  # runs after fusejit's hook, and calls it from a thread it starts too
    late.append(float(prog(x=np.ones(3, np.float32))["y"][0]))
    t = threading.Thread(target=lambda: late.append(float(prog(x=np.ones(3, np.float32))["y"][0])))
    t.start()
    t.join()
    print("late", *late)
atexit.register(late_handler)
import fusejit
prog = fusejit.compile(fusejit.Graph.parse("dim N = 4\\ninput x : f32[N]\\ny = tanh(x) * 2\\noutput y"),
                       backend="cpu", cache_dir={str(cache)!r})
atexit.register(lambda: print("early", float(prog(x=np.ones(3, np.float32))["y"][0])))
x = np.ones(1 << 18, np.float32)
def loop():
    while True:
        prog(x=x)
def compiling(k):
    i = 0
    while True:  # compiles on worker threads, and holds graphs and programs in Python frames at exit
        i += 1
        g = fusejit.Graph.parse(f"input x : f32[4]\\ny = x * {{k * 100000 + i}}\\noutput y")
        fusejit.compile(g, backend="cpu", disk_cache=False)(x=np.ones(4, np.float32))
threads = [threading.Thread(target=loop, daemon=True) for _ in range(4)]
threads += [threading.Thread(target=compiling, args=(k,), daemon=True) for k in range(2)]
for t in threads:
    t.start()
time.sleep(0.5)
print("exiting", flush=True)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(3):  # the abort was a race, though one it lost nearly every time
        res = subprocess.run([sys.executable, "-c", script], timeout=120, env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["exiting", "early", "1.5231883525848389", "late", "1.5231883525848389",
                                      "1.5231883525848389"]
        # No "nanobind: leaked N instances": what the daemon threads hold is never released.
        assert "terminate" not in res.stderr and "leaked" not in res.stderr, res.stderr


def test_a_child_forked_during_a_compile_and_calls_compiles_and_exits(tmp_path):
    # fork() keeps only the forking thread: locks other threads held (a compile's per-key lock, the
    # warning state, threads taking the GIL back) were never released in the child, which then
    # hung compiling the graph the parent was compiling, or at exit. In a subprocess with a timeout.
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = f"""
import os, sys, threading, time, warnings
import numpy as np
import fusejit
warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads, Python 3.12+
src = "input x : f32[4]\\ny = x * " + str(time.time_ns() % 10**9) + " + 1\\noutput y"  # a new key each run
compile = lambda: fusejit.compile(fusejit.Graph.parse(src), backend="cpu", cache_dir={str(cache)!r})
t = threading.Thread(target=compile)
t.start()
hot = fusejit.compile(fusejit.Graph.parse("input x : f32[4]\\ny = x * 3\\noutput y"), backend="cpu",
                      cache_dir={str(cache)!r})
stop = []
def loop():
    while not stop:
        hot(x=np.ones(4, np.float32))
loops = [threading.Thread(target=loop) for _ in range(3)]
for lt in loops:
    lt.start()
time.sleep(float(sys.argv[1]))
compiling = t.is_alive()
pid = os.fork()
if pid == 0:
    print("child", compile()(x=np.ones(4, np.float32))["y"][0], hot(x=np.ones(4, np.float32))["y"][0], flush=True)
    sys.exit(0)  # through the atexit hook
t.join()
stop.append(1)
for lt in loops:
    lt.join()
for _ in range(600):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("compiling" if compiling else "compiled", "status", status)
        break
    time.sleep(0.1)
else:
    os.kill(pid, 9)
    print("hung")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    during = 0
    for delay in ["0.0", "0.02", "0.05", "0.1"]:  # during the compile (about 0.2 s here), mostly
        res = subprocess.run([sys.executable, "-c", script, delay], timeout=120, env=env, capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[-1].endswith(" status 0") and lines[0].startswith("child ") and lines[0].endswith(" 3.0"), res.stdout
        assert "leaked" not in res.stderr, res.stderr
        during += lines[-1].startswith("compiling")
    assert during > 0  # the case that hung


def test_objects_the_extension_cannot_read_are_named_without_its_signatures():
    prog = fusejit.compile(fusejit.Graph.parse("input x : f32[3]\ny = x * 2\noutput y\n"))

    class ArrayInterface:  # __array_interface__ alone: read through NumPy, no copy
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self.keep = a

    class FailingDLPack:
        def __dlpack__(self, *args, **kwargs):
            raise RuntimeError("no")

        def __dlpack_device__(self):
            return (1, 0)

    class NoCapsule(FailingDLPack):
        def __dlpack__(self, *args, **kwargs):
            return 5

    x = np.arange(3, dtype=np.float32)
    assert list(prog(x=ArrayInterface(x))["y"]) == [0, 2, 4]
    assert prog.output_shapes(x=ArrayInterface(x)) == {"y": (3,)}
    for odd in (FailingDLPack(), NoCapsule()):
        with pytest.raises(TypeError, match=r"^input 'x': not readable as a tensor \(a __dlpack__ that fails"):
            prog(x=odd)
        with pytest.raises(TypeError, match=r"^input 'x': not readable as a tensor"):
            prog.output_shapes(x=odd)
    # What a failing __dlpack__ raised is the cause (nanobind swallowed it).
    with pytest.raises(TypeError) as refused:
        prog(x=FailingDLPack())
    assert isinstance(refused.value.__cause__, RuntimeError) and str(refused.value.__cause__) == "no"
    with pytest.raises(TypeError, match=r"^output 'y': not readable as a tensor"):
        prog(x=x, out={"y": NoCapsule()})
    read_only = np.zeros(3, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(fusejit.UserError, match="output 'y': the array is read-only"):
        prog(x=x, out={"y": ArrayInterface(read_only)})
    with pytest.raises(TypeError, match="plan: expected"):  # its own TypeError, not taken for an unreadable array
        prog.output_shapes(x=x, plan=3)


def test_a_shape_takes_integer_numpy_scalars_as_axes_do():
    b = fusejit.GraphBuilder("g")
    x = b.input("x", "f32", [np.int64(3), np.int32(2)])
    b.output("y", x * 2)
    assert b.build().inputs[0].shape == [3, 2]
    with pytest.raises(TypeError, match="a shape holds ints"):
        fusejit.GraphBuilder("h").input("x", "f32", [np.bool_(True)])


def _dlpack_claiming_cuda(a: np.ndarray, device_type: int = 2) -> object:
    """A DLPack producer (ctypes) whose f32 tensor says it is on CUDA device 0 (kDLCUDA = 2, or
    `device_type`: kDLCUDAManaged = 13)."""
    import ctypes

    class Device(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class Tensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                    ("byte_offset", ctypes.c_uint64)]

    class Managed(ctypes.Structure):
        _fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

    class OnCuda:
        def __init__(self):
            self.shape = (ctypes.c_int64 * a.ndim)(*a.shape)
            self.kept = []

        def __dlpack_device__(self):
            return (device_type, 0)

        def __dlpack__(self, *args, **kwargs):
            m = Managed()
            m.dl_tensor = Tensor(a.ctypes.data, Device(device_type, 0), a.ndim, DataType(2, 32, 1),
                                 ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
            self.kept.append(m)  # the capsule has no deleter: the producer keeps the struct
            return new_capsule(ctypes.addressof(m), b"dltensor", None)

    return OnCuda()


def test_device_tensors_on_a_cpu_program_say_the_program_runs_on_the_cpu():
    # Without out=, outputs were allocated on the host for them and the error blamed the outputs
    # ("the outputs are on another kind of device than the inputs"), which the caller never gave.
    prog = fusejit.compile(fusejit.Graph.parse("input x : f32[4]\ny = x * 2\noutput y\n"))
    if prog.backend != "cpu":
        pytest.skip("a GPU program takes CUDA tensors")
    x = np.arange(4, dtype=np.float32)
    for call in (lambda: prog(x=_dlpack_claiming_cuda(x)),
                 lambda: prog(x=x, out={"y": _dlpack_claiming_cuda(np.zeros(4, np.float32))})):
        with pytest.raises(fusejit.UserError, match=r"this program runs on the CPU \(no GPU: .*\); pass host arrays"):
            call()
    # Mixed with host arrays, a device array was "on another kind of device than the tensors before
    # it" (managed memory too): the error names it and says the program runs on the CPU.
    two = fusejit.compile(fusejit.Graph.parse("input x : f32[4]\ninput w : f32[4]\ny = x * w\nz = x + w\noutput y, z\n"))
    for call, says in ((lambda: two(x=x, w=_dlpack_claiming_cuda(x, 13)), "input 'w': in CUDA managed memory"),
                       (lambda: two(x=x, w=x, out={"y": np.zeros(4, np.float32), "z": _dlpack_claiming_cuda(x)}),
                        "output 'z': in GPU memory")):
        with pytest.raises(fusejit.UserError, match=says + r", but this program runs on the CPU \(no GPU: .*\); pass host"):
            call()


def test_load_names_a_bad_folder_argument():
    for bad in (None, 3):  # None reached nanobind's "incompatible function arguments"
        with pytest.raises(TypeError, match=r"^dir: expected a str, bytes or os.PathLike, got "):
            fusejit.load(bad)


def test_an_input_named_as_a_keyword_of_the_call_is_pointed_at():
    q = fusejit.compile(fusejit.Graph.parse("input plan : f32[2]\ninput stream : f32[2]\ny = plan + stream\noutput y\n"))
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError, match=r"plan: expected .* \(plan: the call's own keyword; pass such an input "
                                        r"positionally\)"):
        q(plan=x, stream=0)
    with pytest.raises(TypeError, match=r"stream: expected .* \(stream: the call's own keyword"):
        q(x, stream=x)
    assert q(x, x)["y"].tolist() == [2, 2]


def test_a_device_ordinal_out_of_range_is_a_user_error():
    g = fusejit.Graph.parse(AXPY)
    for bad in (-1, 2**40):
        with pytest.raises(fusejit.UserError, match=f"device {bad}: a CUDA device ordinal is 0 or more"):
            fusejit.compile(g, device=bad)
        with pytest.raises(fusejit.UserError, match=f"device {bad}: a CUDA device ordinal is 0 or more"):
            fusejit.load("/nonexistent", device=bad)


def test_ctrl_c_during_a_compile_raises_keyboard_interrupt(tmp_path):
    """A Ctrl-C that arrives while C++ runs (here: the host compiler signals its process group)
    is raised as KeyboardInterrupt when the call's error is translated: it was a RuntimeError
    (nanobind's wrapping of what the Python error constructor raised)."""
    cxx = tmp_path / "ctrl_c_cxx.sh"
    cxx.write_text("#!/bin/sh\nkill -INT 0\nexit 1\n")
    cxx.chmod(0o755)
    script = ("import fusejit\n"
              "try:\n"
              "    fusejit.compile(fusejit.Graph.parse('input x : f32[4]\\ny = x * 3.25\\noutput y'), disk_cache=False, backend='cpu')\n"
              "except KeyboardInterrupt:\n"
              "    print('KeyboardInterrupt')\n"
              "except BaseException as e:\n"
              "    print(type(e).__name__, e)\n")
    env = dict(os.environ, CXX=str(cxx), FUSEJIT_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                         start_new_session=True)  # its own process group: the signal stays there
    assert res.stdout.strip() == "KeyboardInterrupt", res.stdout + res.stderr


def test_an_atexit_trace_is_not_held_up_by_a_daemon_thread_parked_while_tracing(tmp_path):
    """A daemon thread tracing new patterns in a loop holds fuse's trace lock when fusejit's exit
    hook parks it (it waits for the process to end in its compile); a handler registered before
    `import fusejit` runs after that hook and traces: it waited for the lock for ever."""
    script = """
import atexit, threading, time
import numpy as np
atexit.register(lambda: print("handler", float(g(np.ones((2, 2), np.float32))[0, 0]), flush=True))
import fusejit

@fusejit.fuse(dynamic=False)
def f(x):
    return x * 3 + 1

@fusejit.fuse
def g(x):
    return x * 5

def worker():
    n = 2
    while True:
        n += 1
        f(np.ones(n, np.float32))  # a new pattern, so a trace and a compile, every call

threading.Thread(target=worker, daemon=True).start()
time.sleep(1.0)
"""
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0 and "handler 5.0" in res.stdout, res.stdout + res.stderr


def test_a_child_forked_while_another_thread_traces_traces(monkeypatch):
    """fuse's trace lock held by another thread at fork() was held for ever in the child (only the
    forking thread lives there): the child gets a new one (a reviewer's)."""
    import fusejit._fuse as fz

    held, done = threading.Event(), threading.Event()

    def holder():
        with fz._TRACE_LOCK:
            held.set()
            done.wait(60)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(60)
    try:
        pid = os.fork()
        if pid == 0:  # the child: only this thread, which never held it
            ok = False
            try:
                ok = fusejit.fuse(lambda a: a - 1)(np.ones(6, np.float32)).tolist() == [0.0] * 6
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        done.set()
        t.join(60)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_python_api_hostile_round_finds():
    """A tester's finds: a user's ndarray subclass took the DLPack path (bf16 refused, big-endian
    unnamed); an `out` key that is no string raised join's TypeError; repr of a spent builder's
    value raised; Program(None) an AttributeError and cuda_source(None) nanobind's signature dump;
    np.round(v, 0) was refused."""
    import ml_dtypes

    class MyArr(np.ndarray):
        pass

    h = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput v : bf16[N]\nw = v * 2\noutput w"))
    assert h(np.ones(4, ml_dtypes.bfloat16).view(MyArr))["w"].astype(np.float32).tolist() == [2.0] * 4
    p = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput v : f32[N]\nw = v * 2\nu = v + 1\noutput w, u"))
    with pytest.raises(fusejit.UserError, match="big-endian data"):
        p(np.arange(4, dtype=">f4").view(MyArr))
    with pytest.raises(fusejit.UserError, match="masked array"):
        p(np.ma.masked_array(np.ones(4, np.float32), mask=[0, 1, 0, 0]).view(type("MyMa", (np.ma.MaskedArray,), {})))
    with pytest.raises(TypeError, match=r"out: no output named 0 \(outputs: w, u; out= maps output names to arrays\)"):
        p(np.ones(4, np.float32), out={0: np.zeros(4, np.float32)})
    b = fusejit.GraphBuilder("g")
    x = b.input("x", "f32", [4])
    b.output("y", x * 2)
    b.build()
    assert repr(x) == "<fusejit.Value of a GraphBuilder that has built its graph>"
    with pytest.raises(TypeError, match="made by fusejit.compile"):
        fusejit.Program(None)
    with pytest.raises(TypeError, match='cuda_source: plan: expected "fused" or "unfused", got NoneType'):
        p.cuda_source(None)
    v = np.array([0.5, 1.5, 2.5, -0.5], np.float32)
    assert fusejit.fuse(lambda a: np.round(a, 0))(v).tolist() == np.round(v, 0).tolist()
    assert fusejit.fuse(lambda a: np.round(a, decimals=0))(v).tolist() == np.round(v).tolist()
    assert fusejit.fuse(lambda a: np.round(a, np.int64(0), None))(v).tolist() == np.round(v).tolist()
    with pytest.raises(TypeError, match=r"got str_ \(a 0-d value of dtype <U1"):
        fusejit.fuse(lambda a: a * np.str_("x"))(v)

    class Odd:  # duck-typed: an ndim past every C int (nb::cast<int> threw std::bad_cast)
        ndim, dtype = 2**70, "x"

        def item(self):
            return 1.0

    with pytest.raises(TypeError, match="expected a fusejit.Value or a bool, int or float literal, got Odd"):
        fusejit.fuse(lambda a: a * Odd())(v)
    with pytest.raises(TypeError, match="with decimals has no fusejit op"):
        fusejit.fuse(lambda a: np.round(a, 1))(v)
    # Graph.parse's filename takes an os.PathLike, as Graph.load's path does.
    import pathlib
    with pytest.raises(fusejit.UserError, match=r"^.*g\.txt:2:5: error: unknown op 'tahn'"):
        fusejit.Graph.parse("input x : f32[2]\ny = tahn(x)\noutput y", filename=pathlib.Path("dir") / "g.txt")
    with pytest.raises(TypeError, match="filename: expected a str, bytes or os.PathLike, got int"):
        fusejit.Graph.parse("input x : f32[2]\ny = x\noutput y", filename=3)
    # A complex scalar is no array, nor a 0-d value "taken".
    with pytest.raises(TypeError, match=r"got complex64 \(a 0-d value of dtype complex64: fusejit's dtypes are bool, integers and floats"):
        fusejit.fuse(lambda a: a * np.complex64(1))(v)
    ps = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput v : f32[N]\nparam s : f32 = 1\nw = v * s\noutput w"))
    with pytest.raises(TypeError, match=r"param 's': expected a bool, int or float, got complex64 \(a 0-d value of dtype complex64"):
        ps(v, s=np.complex64(1))


def test_a_testers_finds_of_session_44():
    """A tester's finds: NumPy objects that are no arrays (np.dtype, x.flat) raised AttributeError;
    a strided bf16 or a float8_e5m2 array got the generic "not readable as a tensor"; a DLPack
    tensor of device type 0 was read as host memory, and CPU tensors of two device ids refused;
    each DLPack input was read twice when fusejit allocated the outputs; an importlib.reload of
    fusejit._errors gave errors `except fusejit.UserError` missed; copy/pickle of a Graph failed."""
    import copy
    import pickle

    import ml_dtypes

    p = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput x : f32[N]\ny = x * 2\noutput y"))
    x = np.arange(4, dtype=np.float32)
    for odd in (np.dtype("f4"), x.flat, np.random.default_rng(0), np.add):
        with pytest.raises(TypeError, match=r"input 'x': expected an array"):
            p(x=odd)
        with pytest.raises(TypeError, match=r"output 'y': expected an array"):
            p(x=x, out=[odd])
    h = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput x : bf16[N]\ny = x * 2\noutput y"))
    strided = np.lib.stride_tricks.as_strided(np.zeros(64, ml_dtypes.bfloat16), (4,), (3,))
    with pytest.raises(fusejit.UserError, match=r"input 'x': strides \(3,\) bytes are not multiples of its item size 2"):
        h(x=strided)
    with pytest.raises(fusejit.UserError, match="NumPy dtype float8_e5m2 has no fusejit dtype"):
        h(x=np.zeros(4, ml_dtypes.float8_e5m2))

    class Device:  # a DLPack producer of x's memory on a device it names (dlpack.h's structs)
        def __init__(self, a, device):
            self.a, self.device, self.calls, self.shape = a, device, 0, a.shape

        def __dlpack__(self, **kwargs):
            import ctypes as C

            class Tensor(C.Structure):  # DLManagedTensor: DLTensor, manager_ctx, deleter
                _fields_ = [("data", C.c_void_p), ("device", C.c_int32 * 2), ("ndim", C.c_int32),
                            ("dtype", C.c_uint8 * 4), ("shape", C.POINTER(C.c_int64)),
                            ("strides", C.c_void_p), ("byte_offset", C.c_uint64), ("ctx", C.c_void_p),
                            ("deleter", C.c_void_p)]

            self.calls += 1
            shape = (C.c_int64 * 1)(self.a.size)
            t = Tensor(self.a.ctypes.data, (C.c_int32 * 2)(*self.device), 1, (C.c_uint8 * 4)(2, 32, 1, 0),
                       C.cast(shape, C.POINTER(C.c_int64)), None, 0, None, None)
            self.keep = (t, shape)  # alive as long as the producer (no deleter)
            new = C.pythonapi.PyCapsule_New
            new.restype, new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
            return new(C.addressof(t), b"dltensor", None)

        def __dlpack_device__(self):
            return tuple(self.device)

    with pytest.raises(fusejit.UserError, match=r"input 'x': on DLPack device type 0, which fusejit does not read"):
        p(x=Device(x, (0, 0)))
    cpu = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput x : f32[N]\ny = x * 2\noutput y"), backend="cpu")
    # Pinned host memory (kDLCUDAHost) is host memory to a CPU program, beside NumPy's too.
    assert cpu(x=Device(x, (3, 0)))["y"].tolist() == (x * 2).tolist()
    y = np.zeros(4, np.float32)
    cpu(x=Device(x, (3, 0)), out=[y])
    assert y.tolist() == (x * 2).tolist()
    with pytest.raises(fusejit.UserError, match=r'runs on the CPU \(backend="cpu" was asked for\); pass host arrays'):
        cpu(x=Device(x, (2, 0)))
    two = fusejit.compile(fusejit.Graph.parse("dim N = 4\ninput x : f32[N]\ninput z : f32[N]\ny = x * z\noutput y"))
    assert two(x=x, z=Device(x, (1, 5)))["y"].tolist() == (x * x).tolist()  # host memory: its id means nothing
    liar = Device(np.arange(5, dtype=np.float32), (1, 0))
    liar.shape = (4,)  # a producer's .shape is not taken for its data's (nor learnt from)
    assert p(x=liar)["y"].tolist() == [0, 2, 4, 6, 8]
    assert p(x=Device(x, (1, 0)))["y"].tolist() == (x * 2).tolist()

    class Counting:  # the extension, counting its output_shapes calls
        def __init__(self, inner):
            self.inner, self.asked = inner, 0

        def output_shapes(self, *args):
            self.asked += 1
            return self.inner.output_shapes(*args)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    q = fusejit.compile(p.graph)
    q._p = Counting(q._p)
    for n in (4, 4, 6, 4, 6):  # the output shapes learnt per input shapes
        assert q(x=np.ones(n, np.float32))["y"].shape == (n,)
    assert q._p.asked == 2
    # Errors keep their classes after a reload of the module that defines them (in a child: the
    # reload would outlive this test).
    code = ("import importlib, numpy as np, fusejit\n"
            "p = fusejit.compile(fusejit.Graph.parse('input x : f32[4]\\ny = x * 2\\noutput y'))\n"
            "importlib.reload(fusejit._errors)\n"
            "try:\n    p(x=np.ones(4))\nexcept fusejit.UserError as e:\n    print('caught', e.message)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("caught input 'x': expected f32"), res.stdout + res.stderr
    # The hints are NumPy's and PyTorch's here (C++'s HostTensor in the C++ API: tests/test_api.cpp).
    with pytest.raises(fusejit.UserError, match=r"first \(NumPy: x\.astype\(fusejit\.numpy_dtype\(\"f32\"\)\), PyTorch"):
        p(x=np.ones(4))
    g = p.graph
    assert copy.copy(g) is g and copy.deepcopy(g) is g and copy.copy(p) is p and copy.deepcopy(p) is p
    # dims that are no mapping: a TypeError naming what to pass (nanobind's dumped its signatures).
    text = "dim N = 4\ninput x : f32[N]\ny = x * 2\noutput y"
    for call in (lambda: fusejit.Graph.parse(text, dims=[4]), lambda: g.with_dims(None), lambda: g.with_dims([1])):
        with pytest.raises(TypeError, match=r"^dims: expected a dict \{name: size\}, got (list|NoneType)$"):
            call()
    import types
    assert fusejit.Graph.parse(text, dims=types.MappingProxyType({"N": 7})).dims == {"N": 7}  # any mapping
    back = pickle.loads(pickle.dumps(g))
    assert back.to_text() == g.to_text() and repr(back) == "<fusejit.Graph>"


def test_a_warm_call_of_numpy_arrays_takes_the_short_path_with_every_rule(rng):
    # p(x, y) or p(x=x, y=y), with out= a dict of every output or none, launches without _call
    # once its output shapes are learnt (a hot loop's call costs about a quarter less); what that
    # path refuses, and every other call, still goes by _call's rules.
    p = fusejit.compile(fusejit.Graph.parse(AXPY), backend="cpu")
    x, y = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    first = p(x, y)["z"]  # learns the output shapes
    called = []
    real = p._call
    p._call = lambda *a: called.append(a) or real(*a)
    assert p(x, y)["z"].tobytes() == first.tobytes() and not called
    wide = rng.standard_normal(16).astype(np.float32)
    assert p(wide[::2], y)["z"].tobytes() == (np.float32(2) * wide[::2] + y).tobytes() and not called  # strided
    with pytest.raises(fusejit.UserError, match=r"input 'x': expected f32\[N\], got f64\[8\]"):
        p(x.astype(np.float64), y)  # a shape learnt, the dtype refused (by _call where f64 is not yet known)
    called.clear()
    with pytest.raises(fusejit.UserError, match=r"input 'x': expected f32\[N\], got f64\[8\]"):
        p(x.astype(np.float64), y)  # by the launch itself
    assert not called
    assert p(np.ones(5, np.float32), np.ones(5, np.float32))["z"].tolist() == [3.0] * 5 and len(called) == 1  # new shapes
    z = np.empty(8, np.float32)
    assert p(x=x, y=y)["z"].tobytes() == first.tobytes() and p(y=y, x=x, out={"z": z})["z"] is z
    assert p(x, y, out={"z": z})["z"] is z and z.tobytes() == first.tobytes() and len(called) == 1
    p(x, y, a=3.0)  # a param, out= as a list, an input by position and one by name: _call
    p(x, y, out=[z])
    p(x, y=y)
    assert len(called) == 4
    with pytest.raises(TypeError, match="positional inputs given"):
        p(x, y, x)
    with pytest.raises(fusejit.UserError, match="read-only"):
        p(x, y, out={"z": np.broadcast_to(z, (8,))})  # a read-only output: _call says so
    with pytest.raises(TypeError, match="no output named 'w'"):
        p(x, y, out={"w": z})
    with pytest.raises(TypeError, match="'w' is neither an input nor a param"):
        p(x=x, w=y)
    assert len(called) == 8
    # A bf16 output travels as a uint16 view (_launch): allocated, it takes _call, warm or not (a
    # reviewer's find: the second call failed, "input 'x': not readable as a tensor").
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = fusejit.compile(fusejit.Graph.parse("input x : f32[4]\ny = cast(x, bf16)\nz = x * 2\noutput y, z"),
                        backend="cpu")
    v = np.arange(4, dtype=np.float32)
    for _ in range(3):
        got = b(v)
        assert got["y"].dtype == ml_dtypes.bfloat16 and got["y"].astype(np.float32).tolist() == v.tolist()
    f = fusejit.fuse(lambda v: v.astype(ml_dtypes.bfloat16), backend="cpu")
    assert [f(v).astype(np.float32).tolist() for _ in range(3)] == [v.tolist()] * 3
