"""fusejit.translate (the graph -> NumPy/CuPy/PyTorch translation bench/peers.py runs) checked on
the CPU with NumPy against fusejit: every sample, every op of ir/ops.def, every intermediate's
dtype. So the GPU run of bench/peers.py cannot fail on a translation mistake."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusejit
from conftest import ROOT, SAMPLES, bits, input_ranges, random_inputs, small_graph
from fusejit.translate import OPS, REDUCTIONS, computed_in, generate, mismatch, translate


def assert_close(got, want, dtype, what, precision=None):
    why = mismatch(got, want, dtype, precision)
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
    precision = computed_in(g)
    for t, a in zip(g.outputs, got):
        assert np.asarray(a).dtype == fusejit.numpy_dtype(t.dtype), f"{g.name}: {t.name} has dtype {a.dtype}"
        line = next((ln.strip() for ln in fn.source.splitlines() if f"# {t.name} :" in ln), "")
        assert_close(a, want[t.name], t.dtype, f"{g.name}: output {t.name} ({line})", precision[t.name])


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


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool"])
def test_every_op_translation_matches_fusejit(dtype, rng):
    """One graph per dtype with one output per op defined on it (one compile), on special values
    (floats) and the whole of [-100, 100] (integers: negative exponents, shifts and divisors 0)."""
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
    assert len(ops) >= (10 if dtype == "bool" else 50)
    g = fusejit.Graph.parse("dim N = 64\n" + "\n".join(decls + lines) + "\noutput " +
                            ", ".join(f"y{k}" for _, k in ops))
    ins = random_inputs(g, rng, special=dtype in ("f16", "bf16", "f32", "f64"))
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
    # var: the mean, the squared deviations' mean with the correction, and the deviations' means
    # of the corrected two-pass form (with correction 0 one of them, squared): docs/ops.md
    assert [n.correction for n in g.nodes if n.op == "mean"] == [0, 1, 0, 1, 0, 0, 0, 3]
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


def test_mismatch_is_exact_on_infinities_nan_integers_and_bool():
    """An infinity matches only itself (|g - inf| <= rtol * inf held for every g), NaN only NaN,
    integers and bool exactly; finite floats within TOLERANCE."""
    f16, f32, f64 = np.float16, np.float32, np.float64
    bad = [([-np.inf], [np.inf], "f64", f64), ([1.0], [-np.inf], "f32", f32), ([0], [np.inf], "f16", f16),
           ([np.inf], [3e38], "f32", f32), ([np.nan], [1.0], "f32", f32), ([1.0], [np.nan], "f64", f64),
           ([0], [1], "u8", np.uint8), ([-5], [-4], "i32", np.int32), ([2**62], [2**62 + 1], "i64", np.int64),
           ([True], [False], "bool", np.bool_), ([1.0], [1.001], "f32", f32)]
    for g, w, dt, npt in bad:
        assert mismatch(np.array(g, npt), np.array(w, npt), dt) is not None, (g, w, dt)
    good = [([np.inf], [np.inf], "f32", f32), ([-np.inf], [-np.inf], "f16", f16), ([np.nan], [np.nan], "f64", f64),
            ([1.0], [1.0 + 1e-6], "f32", f32), ([-0.0], [0.0], "f32", f32), ([7], [7], "u8", np.uint8)]
    for g, w, dt, npt in good:
        assert mismatch(np.array(g, npt), np.array(w, npt), dt) is None, (g, w, dt)
    assert "shape" in mismatch(np.zeros(2, f32), np.zeros(3, f32), "f32")


def test_tolerance_is_that_of_the_precision_computed_in():
    """f32 math cast to f64 carries f32's error: computed_in() names f32 and mismatch uses its
    tolerance; exact f64 math keeps f64's."""
    g = fusejit.Graph.parse("input x : f32[2]\ninput d : f64[2]\ny = cast(exp(x), f64)\nz = exp(d) + cast(x, f64)\n"
                            "h = cast(cast(x, f16) * 3, f32)\noutput y, z, h")
    assert computed_in(g) == {"y": "f32", "z": "f64", "h": "f16"}  # widening x is exact: z is f64's
    one_f32_ulp = np.array([1.0 + 2.0**-23]), np.array([1.0])
    assert mismatch(*one_f32_ulp, "f64") is not None
    assert mismatch(*one_f32_ulp, "f64", "f32") is None
    assert mismatch(np.array([np.inf]), np.array([1.0]), "f64", "f32") is not None


def exact_case(text: str, **inputs):
    """Each output of graph `text` run by fusejit (CPU) and by its NumPy translation on `inputs`
    (lists in the input's dtype): (name, translation, fusejit) triples."""
    g = fusejit.Graph.parse(text)
    args = {t.name: np.array(inputs[t.name], dtype=np.float64).astype(fusejit.numpy_dtype(t.dtype)) for t in g.inputs}
    want = fusejit.compile(g, backend="cpu")(**args)
    with np.errstate(all="ignore"):
        got = translate(g, "numpy")(**args)
    return [(t.name, np.asarray(a), want[t.name]) for t, a in zip(g.outputs, got)]


NAN, INF = float("nan"), float("inf")
# Cases where NumPy's own call differs from docs/ops.md and the translation must give fusejit's
# bits (NaN payloads aside): each failed before the translation followed the rule named.
EXACT_CASES = {
    # Casts: truncate toward zero, NaN -> 0, saturate (u8: negatives -> 0); float -> bool is x != 0.
    "cast_f32": ("input x : f32[N]\n" + "".join(f"c_{d} = cast(x, {d})\n" for d in ("i8", "u8", "i32", "i64", "bool")) +
                 "output c_i8, c_u8, c_i32, c_i64, c_bool",
                 [-1.0, NAN, INF, -INF, 1e10, -1e10, 255.9, -1.9, 127.5, -128.5, 2.0**31, -2.0**31 - 256, 2.0**63, -0.0, 0.5]),
    "cast_f64": ("input x : f64[N]\na = cast(x, i64)\nb = cast(x, i32)\nc = cast(x, u8)\noutput a, b, c",
                 [NAN, 2.0**63, -2.0**63 - 4096, 9.2e18, -1e300, 2147483647.9, -2147483648.9, 256.0, -0.999]),
    "cast_half": ("input x : f16[N]\ninput y : bf16[N]\na = cast(x, i8)\nb = cast(y, i32)\nc = cast(y, u8)\n"
                  "d = cast(y, bool)\noutput a, b, c, d", [NAN, INF, -INF, 300.0, -129.0, -1.0, 65504.0, -0.0, 1e-7],
                  [NAN, INF, -INF, 3e9, -3e9, -1.0, 255.5, -0.0, 1e-7]),
    # Integer pow with a negative exponent: 1 for base 1, +-1 for base -1, else 0.
    "pow_int": ("input x : i32[N]\ninput y : i32[N]\nz = pow(x, y)\nw = pow(cast(x, i8), cast(y, i8))\n"
                "v = pow(cast(x, i64), cast(y, i64))\noutput z, w, v",
                [2, 1, -1, -1, 0, 3, -2, 5, 7], [-1, -3, -3, -2, -1, 0, 7, 2, 31]),
    # fma rounded once; lerp as torch's fma form (fj_lerp).
    "fma_f32": ("input x : f32[N]\ninput y : f32[N]\nz = fma(x, y, -(x * y))\noutput z",
                [0.1, 4097.0, 1 / 3, 1e30], [0.1, 4097.0, 3.0, 1e10]),
    "fma_f64": ("input x : f64[N]\ninput y : f64[N]\ninput w : f64[N]\nz = fma(x, y, w)\noutput z",
                [0.1, 1e200, 1e200, INF, -0.0, 1.0, 1 / 3, 1e308],
                [10.0, 1e200, 1e200, 0.0, 1.0, 1.0, 3.0, 10.0], [-1.0, -INF, 1.0, 1.0, -0.0, -1.0, -1.0, -1e308]),
    # bf16: 7 * 37 = 259 is a bf16 tie, so the tiny c decides (rounding through f64 alone gives 260).
    "fma_half": ("input x : bf16[N]\ninput y : bf16[N]\ninput w : bf16[N]\nz = fma(x, y, w)\n"
                 "h = fma(cast(x, f16), cast(y, f16), cast(w, f16))\noutput z, h",
                 [7.0, 7.0, 0.1, 300.0], [37.0, 37.0, 0.1, 300.0], [-2.0**-100, 2.0**-100, -0.01, -60000.0]),
    "lerp": ("input x : f32[N]\ninput y : f32[N]\ninput w : f32[N]\nz = lerp(x, y, w)\n"
             "h = lerp(cast(x, f16), cast(y, f16), cast(w, f16))\noutput z, h",
             [-1.0, 0.0, 1e38, 1.0, 3.0], [3.4e38, 0.0, -3e38, 3.0, 60000.0], [-1.0, 2.0, 0.75, 0.3, 0.99]),
    # hardswish is (x * h) / 6: x * 6 overflows at 3e38.
    "hardswish": ("input x : f32[N]\ny = hardswish(x)\noutput y", [3.4e38, 1e38, 3e38, -3.0, 2.5, -0.0]),
    # relu(-0.0) and sign(-0.0) are +0.0.
    "signed_zero": ("input x : f16[N]\ninput y : bf16[N]\na = relu(x)\nb = sign(y)\nc = sign(x)\nd = relu(y)\n"
                    "output a, b, c, d", [-0.0, 0.0, -1.0], [-0.0, 0.0, NAN]),
}


@pytest.mark.parametrize("case", EXACT_CASES, ids=list(EXACT_CASES))
def test_translation_follows_ops_md_where_numpy_does_not(case):
    text, *values = EXACT_CASES[case]
    names = [ln.split()[1] for ln in text.splitlines() if ln.startswith("input ")]
    text = f"dim N = {len(values[0])}\n" + text
    for name, got, want in exact_case(text, **dict(zip(names, values))):
        assert got.dtype == want.dtype, (case, name)
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
        same = [bits(g) == bits(w) or n for g, w, n in zip(got, want, nan)]
        assert all(same), f"{case} {name}: translation {got} vs fusejit {want}"


def test_ops_md_values_the_exact_cases_check():
    """A few docs/ops.md values behind EXACT_CASES, stated without fusejit."""
    def outputs(case, n, **inputs):
        return {name: got for name, got, _ in exact_case(f"dim N = {n}\n" + EXACT_CASES[case][0], **inputs)}

    c = outputs("cast_f32", 5, x=[-1.0, NAN, INF, 1e10, NAN])
    assert c["c_u8"][0] == 255 and c["c_u8"][2] == 255 and c["c_i32"][1] == 0  # u8 through i64: wraps and c["c_i8"][2] == 127 and c["c_i32"][3] == 2**31 - 1
    assert c["c_bool"][4]
    p = outputs("pow_int", 4, x=[2, 1, -1, -1], y=[-1, -3, -3, -2])
    assert list(p["z"]) == list(p["w"]) == list(p["v"]) == [0, 1, -1, 1]
    assert outputs("lerp", 1, x=[-1.0], y=[3.4e38], w=[-1.0])["z"][0] == np.float32(-3.4e38)
    assert list(outputs("hardswish", 2, x=[3e38, 3.0])["y"]) == [np.inf, 3]  # x * 6 overflows
    assert list(outputs("fma_f64", 2, x=[0.1, 1e200], y=[10.0, 1e200], w=[-1.0, -INF])["z"]) == [2.0**-54, -np.inf]
    assert list(outputs("fma_half", 2, x=[7.0, 7.0], y=[37.0, 37.0], w=[-2.0**-100, 2.0**-100])["z"]) == [258, 260]
    z = outputs("signed_zero", 1, x=[-0.0], y=[-0.0])
    assert not np.signbit(z["a"][0]) and not np.signbit(np.float32(z["b"][0]))


def test_half_nodes_are_computed_in_f32():
    """An f16/bf16 node is computed in f32 and rounded once (docs/ops.md): NumPy's f16 exp
    overflowed in softplus(x) for x in (11.1, 20], bf16 gelu(-3) cancelled to 44% off. Math
    library calls: within TOLERANCE, not bit for bit."""
    text = ("dim N = 6\ninput x : f16[N]\ninput y : bf16[N]\na = softplus(x)\nb = gelu(y)\nc = gelu(x)\n"
            "d = sigmoid(y)\ne = gelu_tanh(y)\noutput a, b, c, d, e")
    out = exact_case(text, x=[11.5, 12.0, 15.0, 20.0, -3.0, -2.5], y=[-3.0, -2.5, -4.0, -1.0, 1.0, 0.5])
    for name, got, want in out:
        assert_close(got, want, "f16" if name in "ac" else "bf16", name)
    assert np.isfinite(out[0][1]).all()
