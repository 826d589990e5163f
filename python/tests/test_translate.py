"""fusejit.translate (the graph -> NumPy/CuPy/PyTorch translation bench/peers.py runs) checked on
the CPU with NumPy against fusejit: every sample, every op of ir/ops.def, every intermediate's
dtype. So the GPU run of bench/peers.py cannot fail on a translation mistake."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusejit
from conftest import ROOT, SAMPLES, input_ranges, random_inputs, small_graph
from fusejit.translate import OPS, REDUCTIONS, generate, mismatch, translate

def assert_close(got, want, dtype, what):
    why = mismatch(got, want, dtype)
    assert why is None, f"{what}: {why}"


def op_rows():
    """(name, rule) of every callable row of ir/ops.def (the rows pad their columns with spaces)."""
    text = (ROOT / "ir" / "ops.def").read_text()
    rows = re.finditer(r'^FJ_OP\(\w+,\s*"(\w+)",\s*(\d),\s*(\w+)', text, re.M)
    return [(m[1], m[3]) for m in rows if m[2] != "0"]


def test_every_op_has_a_translation():
    rows = op_rows()
    assert len(rows) > 70, "the ir/ops.def row pattern no longer matches"
    missing = [op for op, rule in rows if op not in (REDUCTIONS if rule == "Reduce" else OPS)]
    assert not missing, f"ops without an entry in fusejit.translate.OPS: {missing}"


def check_translation(g, inputs, params=None):
    prog = fusejit.compile(g, backend="cpu")
    want = prog(**inputs, **(params or {}))
    fn = translate(g, "numpy")
    pvals = {p.name: fusejit.numpy_dtype(p.dtype).type((params or {}).get(p.name, p.default)) for p in g.params}
    with np.errstate(all="ignore"):
        got = fn(**inputs, **pvals)
    for t, a in zip(g.outputs, got):
        assert np.asarray(a).dtype == fusejit.numpy_dtype(t.dtype), f"{g.name}: {t.name} has dtype {a.dtype}"
        line = next((ln.strip() for ln in fn.source.splitlines() if f"# {t.name} :" in ln), "")
        assert_close(a, want[t.name], t.dtype, f"{g.name}: output {t.name} ({line})")


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_translation_matches_fusejit(path, rng):
    g = small_graph(path)
    check_translation(g, random_inputs(g, rng, input_ranges(path)))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_translation_keeps_dtypes(path, rng):
    """Every intermediate of the generated NumPy code has the dtype fusejit gives its node (so no
    silent promotion makes a peer compute in another precision)."""
    g = small_graph(path)
    src, _ = generate(g, "numpy")
    checked = re.sub(r"^(    (v\d+) = .*#.* : (\w+))$",
                     r"\1\n    assert \2.dtype == fj.\3, ('\2', \2.dtype)", src, flags=re.M)
    fn = translate(g, "numpy")
    env = dict(fn.__globals__)
    exec(checked, env)
    ins = random_inputs(g, rng, input_ranges(path))
    pvals = {p.name: fusejit.numpy_dtype(p.dtype).type(p.default) for p in g.params}
    with np.errstate(all="ignore"):
        env["fn"](**ins, **pvals)


# Each op's arity, from its ir/ops.def row (guessing from the translation missed fma and lerp).
ARITY = {m[1]: int(m[2]) for m in re.finditer(r'^FJ_OP\(\w+,\s*"(\w+)",\s*(\d)', (ROOT / "ir" / "ops.def").read_text(), re.M)}


def op_line(op: str, k: int, dtype: str) -> tuple[list[str], str]:
    """Input declarations and the statement `y<k> = op(...)` applying `op` to inputs of `dtype`
    (a bool condition for where)."""
    arity = ARITY[op]
    names = [f"{n}{k}" for n in "abc"[:arity]]
    decl = [f"input {n} : {'bool' if (op == 'where' and n[0] == 'a') else dtype}[N]" for n in names]
    call = f"cast({names[0]}, i32)" if op == "cast" else f"{op}({', '.join(names)})"
    return decl, f"y{k} = {call}"


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "bool"])
def test_every_op_translation_matches_fusejit(dtype, rng):
    """One graph per dtype with one output per op defined on it (one compile), on special values."""
    decls, lines, ops = [], [], []
    for k, op in enumerate(sorted(OPS)):
        decl, line = op_line(op, k, dtype)
        try:  # ops undefined on this dtype are a parse error: leave them out
            fusejit.Graph.parse("dim N = 64\n" + "\n".join(decl) + f"\n{line}\noutput y{k}")
        except fusejit.UserError:
            continue
        decls += decl
        lines.append(line)
        ops.append((op, k))
    assert len(ops) >= {"f32": 50, "f16": 50, "i32": 25, "bool": 10}[dtype]
    g = fusejit.Graph.parse("dim N = 64\n" + "\n".join(decls + lines) + "\noutput " +
                            ", ".join(f"y{k}" for _, k in ops))
    ins = random_inputs(g, rng, special=dtype in ("f32", "f16"))
    for op, k in ops:
        if op == "pow" and dtype == "i32":
            ins[f"b{k}"] = np.abs(ins[f"b{k}"]) % 5  # NumPy refuses negative integer powers
        if op in ("floordiv", "mod", "fmod") and dtype == "i32":
            ins[f"b{k}"][ins[f"b{k}"] == 0] = 1  # NumPy's x // 0 differs (docs/ops.md: fusejit gives 0)
        if op == "cast" and dtype in ("f32", "f16"):  # float -> int of NaN, inf or out of range: undefined in NumPy
            a = ins[f"a{k}"]
            ins[f"a{k}"] = np.nan_to_num(a, nan=0, posinf=0, neginf=0).clip(-1e4, 1e4).astype(a.dtype)
    check_translation(g, ins)


@pytest.mark.parametrize("dtype", ["i8", "u8", "i32", "i64", "bool"])
def test_bit_ops_translation_equals_fusejit_exactly(dtype):
    """The bitwise ops and shifts on every pair of edge values (MIN, MAX, 0, +-1 and shift counts
    -1, 0, width - 1, width, width + 1, 64, 100): NumPy's result bit for bit (docs/ops.md: NumPy
    and PyTorch agree on every shift count), not within TOLERANCE's integer slack."""
    npt = fusejit.numpy_dtype(dtype)
    if dtype == "bool":
        edges, ops = [False, True], ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"]
    else:
        info, width = np.iinfo(npt), np.dtype(npt).itemsize * 8
        edges = sorted(v for v in {int(info.min), int(info.min) + 1, -1, 0, 1, 2, width - 1, width, width + 1, 64, 100,
                                   int(info.max)} if info.min <= v <= info.max)
        ops = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift"]
    a = np.array([x for x in edges for _ in edges], dtype=npt)
    b = np.array([y for _ in edges for y in edges], dtype=npt)
    lines = [f"y{k} = {op}(a)" if op == "bitwise_not" else f"y{k} = {op}(a, b)" for k, op in enumerate(ops)]
    g = fusejit.Graph.parse(f"input a : {dtype}[{a.size}]\ninput b : {dtype}[{a.size}]\n" + "\n".join(lines) +
                            "\noutput " + ", ".join(f"y{k}" for k in range(len(ops))))
    want = fusejit.compile(g, backend="cpu")(a=a, b=b)
    got = translate(g, "numpy")(a=a, b=b)
    for k, op in enumerate(ops):
        assert got[k].dtype == want[f"y{k}"].dtype, op
        assert np.array_equal(got[k], want[f"y{k}"]), f"{op} on {dtype}: {np.argwhere(got[k] != want[f'y{k}'])[:4]}"


def test_var_std_and_corrected_mean_translate_and_match_numpy(rng):
    """var/std expand into a mean with a correction (NodeInfo.correction); the translation divides
    the sum by max(0, n - correction), and fusejit matches NumPy's float64 var with ddof."""
    g = fusejit.Graph.parse("input x : f32[6, 50]\nv = var(x, -1)\ns = std(x, 0, keepdim, correction=0)\n"
                            "m = mean(x, [0, 1], correction=3)\noutput v, s, m")
    assert [n.correction for n in g.nodes if n.op == "mean"] == [0, 1, 0, 0, 3]
    x = rng.standard_normal((6, 50)).astype(np.float32) * 100 + 7
    check_translation(g, {"x": x})
    out = fusejit.compile(g, backend="cpu")(x=x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out["v"], np.var(x64, axis=-1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(out["s"], np.std(x64, axis=0, keepdims=True, ddof=0), rtol=1e-5)
    np.testing.assert_allclose(out["m"], x64.sum() / (x64.size - 3), rtol=1e-5)
    # The divisor comes from the shape at call time, not the graph's declared dims.
    y = rng.standard_normal((3, 32)).astype(np.float32)
    with np.errstate(all="ignore"):
        v, s, m = translate(g, "numpy")(x=y)
    np.testing.assert_allclose(v, np.var(y.astype(np.float64), axis=-1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(m, y.astype(np.float64).sum() / (y.size - 3), rtol=1e-5)
