"""fusejit.GraphBuilder from Python: the graphs it builds equal the parsed text, its operators map
to the graph format's ops (with their semantics: sign of zero, Python's // and %), programs built
from it run on the CPU path, and bad calls raise clear errors."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import fusejit
from conftest import bits

RMSNORM_TEXT = """graph rmsnorm
dim T = 8
input x : bf16[T, 64]
input w : bf16[64]
param eps : f32 = 1e-06
xf = cast(x, f32)
ms = mean(xf * xf, -1, keepdim)
y = cast(xf * rsqrt(ms + eps), bf16) * w
output y
"""


def build_rmsnorm() -> fusejit.Graph:
    b = fusejit.GraphBuilder("rmsnorm")
    T = b.dim("T", 8)
    x = b.input("x", "bf16", [T, 64])
    w = b.input("w", "bf16", [64])
    eps = b.param("eps", "f32", 1e-6)
    xf = b.name(b.cast(x, "f32"), "xf")
    ms = b.name(b.reduce("mean", xf * xf, -1, keepdim=True), "ms")
    b.output("y", b.cast(xf * b.op("rsqrt", ms + eps), "bf16") * w)  # an unnamed value takes the output's name
    return b.build()


def test_built_graph_equals_parsed_text():
    built = build_rmsnorm()
    assert built.to_text() == fusejit.Graph.parse(RMSNORM_TEXT).to_text()
    assert [(t.name, t.dtype, t.dim_names) for t in built.inputs] == [("x", "bf16", ["T", ""]), ("w", "bf16", [""])]


def test_built_graph_runs_and_follows_the_tensors():
    prog = fusejit.compile(build_rmsnorm(), backend="cpu")
    text = fusejit.compile(fusejit.Graph.parse(RMSNORM_TEXT), backend="cpu")
    rng = np.random.default_rng(3)
    bf16 = fusejit.numpy_dtype("bf16")
    for rows in (8, 3, 1):  # the dim T follows the tensors
        x = rng.uniform(-4, 4, (rows, 64)).astype(bf16)
        w = rng.uniform(0.5, 1.5, 64).astype(bf16)
        y = prog(x=x, w=w, eps=1e-5)["y"]
        assert y.shape == (rows, 64) and y.dtype == bf16
        assert bits(y) == bits(text(x=x, w=w, eps=1e-5)["y"])
        xf = x.astype(np.float64)
        ref = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-5) * w.astype(np.float64)
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2, atol=1e-2)


def test_value_shape_dtype_and_repr():
    b = fusejit.GraphBuilder()
    n = b.dim("N", 5)
    x = b.input("x", "f16", [n, 3])
    s = b.reduce("sum", x, [0, 1])
    assert (x.dtype, x.shape, s.dtype, s.shape) == ("f16", [5, 3], "f16", [])
    assert repr(x) == "<fusejit.Value x : f16[N, 3]>" and repr(n) == "<fusejit.Dim N = 5>"
    assert (b.reduce("amax", x, 1, keepdim=True).shape, b.reduce("sum", x).shape) == ([5, 1], [])
    assert (b.cast(x < 1, "i32").dtype, (x.__lt__(1)).dtype) == ("i32", "bool")
    # name returns its argument itself: a value hashes by identity, so a dict keyed by it still finds it
    d = x * 2
    assert b.name(d, "doubled") is d and repr(d) == "<fusejit.Value doubled : f16[N, 3]>"


# (op, the op Python calls when the literal is on the left, operator)
OPERATORS = [
    ("add", "add", lambda a, c: a + c), ("sub", "sub", lambda a, c: a - c), ("mul", "mul", lambda a, c: a * c),
    ("div", "div", lambda a, c: a / c), ("floordiv", "floordiv", lambda a, c: a // c),
    ("mod", "mod", lambda a, c: a % c), ("pow", "pow", lambda a, c: a ** c),
    # 2.5 < c is c > 2.5 in Python: the mirrored comparison, the same values
    ("lt", "gt", lambda a, c: a < c), ("le", "ge", lambda a, c: a <= c),
    ("gt", "lt", lambda a, c: a > c), ("ge", "le", lambda a, c: a >= c),
]


@pytest.mark.parametrize("name,reflected,fn", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operators_are_the_graph_formats_ops(name, reflected, fn):
    """Each Python operator (forward and reflected) builds the op of the same name, and computes
    what that op computes in graph text, bit for bit."""
    b = fusejit.GraphBuilder()
    a, c = b.input("a", "f32", [16]), b.input("c", "f32", [16])
    b.output("y", fn(a, c))
    b.output("r", fn(2.5, c))  # the literal on the left
    g = b.build()
    ops = [n.op for n in g.nodes]
    assert name in ops and reflected in ops and len(ops) == 5  # a, c, y, the literal, r
    text = fusejit.Graph.parse(f"input a : f32[16]\ninput c : f32[16]\ny = {name}(a, c)\nr = {name}(2.5, c)\noutput y, r\n")
    rng = np.random.default_rng(7)
    a_v = np.array([0.0, -0.0, 1.5, -7.0, np.inf, -np.inf, np.nan, 3.0, 2.0, -2.0, 5.0, 1e-40, -1.0, 4.0, 0.5, 9.0],
                   np.float32)
    c_v = rng.choice(np.array([0.0, -0.0, 2.0, -2.0, 3.0, np.inf, -1.5], np.float32), 16)
    got = fusejit.compile(g, backend="cpu")(a=a_v, c=c_v)
    want = fusejit.compile(text, backend="cpu")(a=a_v, c=c_v)
    assert bits(got["y"]) == bits(want["y"]) and bits(got["r"]) == bits(want["r"])


def test_unary_and_integer_operators():
    b = fusejit.GraphBuilder()
    x, i = b.input("x", "f32", [4]), b.input("i", "i32", [4])
    b.output("neg", -x)
    b.output("abs", abs(x))
    b.output("bits", ((i & 6) | (i ^ 1)) << 1 >> 1)
    b.output("inv", ~i)
    b.output("where", b.op("where", x > 0, x, 0.5))
    out = fusejit.compile(b.build(), backend="cpu")(
        x=np.array([0.0, -0.0, 2.0, -3.0], np.float32), i=np.array([-7, 0, 5, 2**31 - 1], np.int32))
    assert bits(out["neg"]) == bits(np.array([-0.0, 0.0, -2.0, 3.0], np.float32))  # neg, not 0 - x
    assert bits(out["abs"]) == bits(np.array([0.0, 0.0, 2.0, 3.0], np.float32))
    i = np.array([-7, 0, 5, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(out["bits"], (((i & 6) | (i ^ 1)) << 1) >> 1)
    np.testing.assert_array_equal(out["inv"], ~i)
    np.testing.assert_array_equal(out["where"], np.array([0.5, 0.5, 2.0, 0.5], np.float32))


def test_literals_are_weak_and_numpy_scalars_count():
    b = fusejit.GraphBuilder()
    h = b.input("h", "f16", [2])
    assert (h * 2).dtype == "f16" and (h * 2.5).dtype == "f16" and (h + True).dtype == "f16"
    assert (h * np.float64(3.0)).dtype == "f16" and (h + np.array(1)).dtype == "f16"
    assert b.op("maximum", h, 0).dtype == "f16"


def test_values_keep_their_builder_alive():
    def make():
        b = fusejit.GraphBuilder("kept")
        return b, b.input("x", "f32", [4])

    _, x = make()
    gc.collect()
    y = x * 3  # the builder is alive through x
    assert repr(y) == "<fusejit.Value : f32[4]>"


def test_errors():
    b, other = fusejit.GraphBuilder(), fusejit.GraphBuilder()
    x, z = b.input("x", "f32", [4]), other.input("z", "f32", [4])
    with pytest.raises(fusejit.UserError, match="another GraphBuilder"):
        x + z
    with pytest.raises(TypeError, match="got str"):
        x + "1"
    with pytest.raises(fusejit.UserError, match=r"outside int64"):
        x + 2**70
    with pytest.raises(fusejit.UserError, match="unknown dtype 'f33'; did you mean 'f32'"):
        b.input("y", "f33", [4])
    with pytest.raises(fusejit.UserError, match="unknown dtype 'float32': fusejit writes it f32"):
        b.input("y", "float32", [4])
    with pytest.raises(TypeError, match="ints and fusejit.Dims"):
        b.input("y", "f32", [4.0])
    with pytest.raises(TypeError, match="ints and fusejit.Dims"):
        b.input("y", "f32", [True])
    with pytest.raises(fusejit.UserError, match="belongs to another GraphBuilder"):
        b.input("y", "f32", [other.dim("M", 2)])
    with pytest.raises(TypeError, match="axes: an int"):
        b.reduce("sum", x, "0")
    with pytest.raises(fusejit.UserError, match="axis 3 is out of range"):
        b.reduce("sum", x, 3)
    # NumPy's keepdims is keepdim, as fusejit.reduce and Value.sum take it; other NumPy and PyTorch
    # keyword names say what fusejit calls them.
    kb = fusejit.GraphBuilder()
    kx = kb.input("x", "f32", [4])
    assert kb.reduce("sum", kx, -1, keepdims=True).shape == kb.reduce("sum", kx, -1, keepdim=True).shape == [1]
    assert kb.reduce("sum", kx, -1, keepdims=False).shape == []
    with pytest.raises(TypeError, match="reduce\\(\\): give keepdim or NumPy's keepdims, not both"):
        b.reduce("sum", x, -1, True, keepdims=True)
    with pytest.raises(TypeError, match="reduce\\(\\): give keepdim or NumPy's keepdims, not both"):
        fusejit.reduce("sum", x, -1, keepdim=True, keepdims=False)
    with pytest.raises(TypeError, match="keepdims: expected a bool"):
        b.reduce("sum", x, -1, keepdims="yes")  # NumPy's keepdims=1 is taken (below), a string not
    # NumPy's axis= and PyTorch's dim= are axes (a user types them by reflex; keepdims= is taken too).
    assert kb.reduce("sum", kx, dim=-1).shape == kb.reduce("sum", kx, axis=[-1], keepdims=False).shape == []
    assert fusejit.reduce("sum", kx, dim=0, keepdims=True).shape == [1]
    for given in ({"axes": -1, "dim": -1}, {"axes": 0, "axis": 0}, {"axis": 0, "dim": 0}):
        with pytest.raises(TypeError, match="reduce\\(\\): give one of axes, axis and dim"):
            fusejit.reduce("sum", x, **given)
    assert kb.reduce("sum", kx, axis=None, dim=0).shape == kb.reduce("sum", kx, None, dim=0).shape == []
    for reduce in (fusejit.reduce, kb.reduce):  # NumPy's keepdims=1, in both (it said "keepdim: ...")
        assert reduce("sum", kx, -1, keepdims=1).shape == [1]
        for bad in ({1}, {1: 2}, b"\x01", "0"):  # NumPy refuses them too
            with pytest.raises(TypeError, match="axis: an int, a tuple of ints or None, got"):
                reduce("sum", kx, axis=bad)

    def raising():
        yield 0
        raise KeyError("from the generator")

    with pytest.raises(KeyError, match="from the generator"):  # it reduced every axis
        fusejit.reduce("sum", kx, axis=raising())

    def raising_type_error():
        yield 0
        raise TypeError("from the generator")

    with pytest.raises(TypeError, match="from the generator"):  # a TypeError too (a reviewer's find)
        fusejit.reduce("sum", kx, axis=raising_type_error())
    with pytest.raises(TypeError, match="axis: an int, a tuple of ints or None, got bytearray"):
        fusejit.reduce("sum", kx, axis=bytearray(b"\x00"))
    # NumPy's spelling keeps NumPy's meaning where fusejit's differs (a hostile tester's finds):
    # axis=() reduces nothing, and NumPy's var/std default to ddof=0 where fusejit's correction is 1.
    for nothing in ((), [], range(0), np.zeros(0, np.int64), iter(())):  # any empty one, as NumPy's ()
        with pytest.raises(fusejit.UserError, match=r"sum over axis=\(\) reduces nothing in NumPy"):
            fusejit.reduce("sum", x, axis=nothing)
    assert kb.reduce("sum", kx, axis=range(1)).shape == kb.reduce("sum", kx, axis=np.array([0])).shape == []
    assert kb.reduce("sum", kx, dim=()).shape == []  # PyTorch's dim=(): every axis, as axes=[]
    with pytest.raises(TypeError, match=r"reduce\('var', axis=...\): give correction=N \(NumPy's ddof=N\)"):
        fusejit.reduce("var", kx, axis=-1)
    assert kb.reduce("std", kx, axis=-1, correction=0).shape == kb.reduce("var", kx, dim=-1).shape == []
    with pytest.raises(TypeError, match="unknown argument 'ddof': .* correction=N"):
        b.reduce("var", x, ddof=1)
    # A correction beyond int64 gets the range message a 2^62 + 1 gets (it was "outside int64").
    for bad, says in ((2**62 + 1, "out of range"), (2**63, "out of range"), (np.uint64(2**64 - 1), "out of range"),
                      (-2**70, "negative"), (-1, "negative")):
        with pytest.raises(fusejit.UserError, match=f"var: correction={int(bad)} is {says}"):
            kb.reduce("var", kx, -1, correction=bad)
    assert kb.reduce("var", kx, -1, correction=np.int64(2)).shape == []
    with pytest.raises(TypeError, match="unknown argument 'frob': reduce\\(\\) takes name, x, axes"):
        b.reduce("sum", x, frob=1)
    with pytest.raises(fusejit.UserError, match="unknown op 'frob'"):
        b.op("frob", x)
    with pytest.raises(fusejit.UserError, match="add takes 2 arguments, got 1"):
        b.op("add", x)
    with pytest.raises(fusejit.UserError, match=r"literal 1e\+300 does not fit in f32 \(it would overflow to inf\)"):
        b.output("c", 1e300)  # an f32 constant: it was inf, silently (x * 1e300 was refused)
    assert b.op("div", 9007199254740993, 3) == 9007199254740993 / 3  # the exact quotient, as Python's
    with pytest.raises(TypeError, match="no keyword argument 'approximate': .* is op\\('gelu_tanh', x\\) here"):
        b.op("gelu", x, approximate="tanh")
    with pytest.raises(TypeError, match="no keyword argument 'approximate': .*gelu_tanh"):
        fusejit.op("gelu", x, approximate="tanh")
    with pytest.raises(TypeError, match="no keyword argument 'dtype': cast the result"):
        b.op("exp", x, dtype="f16")
    with pytest.raises(TypeError, match=r"no keyword argument 'alpha': its operands are positional: op\('add', x, ...\)"):
        b.op("add", x, x, alpha=2)
    with pytest.raises(TypeError, match="no truth value"):
        bool(x > 0)
    with pytest.raises(fusejit.UserError, match="name"):
        b.input("x", "f32", [4])  # x is bound
    with pytest.raises(fusejit.UserError, match="no output"):
        b.build()
    b.output("y", x + 1)
    assert b.build().op_count == 2
    with pytest.raises(fusejit.UserError, match="already built"):
        b.output("w", x)
    with pytest.raises(fusejit.UserError, match="already built"):
        x * 2


def test_the_stubs_list_what_the_package_has():
    """python/fusejit/__init__.pyi declares every name of fusejit.__all__, and every attribute it
    declares on a class exists at run time (a stub that drifts from the binding fails here)."""
    import ast
    import pathlib

    stub = ast.parse((pathlib.Path(fusejit.__file__).parent / "__init__.pyi").read_text())
    top = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    top |= {t.id for n in stub.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)}
    assert set(fusejit.__all__) <= top, set(fusejit.__all__) - top
    for cls in (n for n in stub.body if isinstance(n, ast.ClassDef)):
        runtime = getattr(fusejit, cls.name)
        for member in cls.body:
            if isinstance(member, ast.FunctionDef) and member.name != "__init__":
                assert hasattr(runtime, member.name), f"{cls.name}.{member.name}"


def test_numpy_values_as_arguments():
    """NumPy scalars and 0-d arrays are literals on either side (NumPy defers to Value's operators);
    an array is refused; NumPy integers are axes, NumPy bools keepdim; longdouble and complex are no
    bool, int or float (a TypeError, not a crash)."""
    b = fusejit.GraphBuilder()
    x = b.input("x", "f32", [2, 3])
    assert (np.float32(2) * x).dtype == "f32" and (np.array(3.0) < x).dtype == "bool"
    with pytest.raises(TypeError, match=r"np.add: an array operand of shape \(3,\) is no graph value"):
        np.array([1.0, 2.0, 3.0]) + x
    with pytest.raises(TypeError, match="got ndarray"):
        x + np.array([1.0, 2.0, 3.0])
    assert b.reduce("sum", x, np.int64(-1)).shape == [2]
    assert b.reduce("sum", x, np.array([0, 1]), keepdim=np.bool_(True)).shape == [1, 1]
    assert b.reduce("sum", x, range(2)).shape == []
    for bad in (np.longdouble(1.5), np.clongdouble(1), 1j):
        with pytest.raises(TypeError, match="expected a fusejit.Value or a bool, int or float"):
            x + bad
        with pytest.raises(TypeError, match="expected a bool, int or float"):
            b.param(f"p{abs(hash(type(bad))) % 1000}", "f64", bad)
    with pytest.raises(TypeError, match="axes: expected an int, got bool"):
        b.reduce("sum", x, [True])
    with pytest.raises(TypeError, match="keepdim: expected a bool"):
        b.reduce("sum", x, 0, keepdim=1)


def test_a_refused_call_adds_no_nodes_and_messages_show_odd_bytes():
    b = fusejit.GraphBuilder("g")
    x = b.input("x", "f32", [3])
    with pytest.raises(fusejit.UserError):
        b.reduce("sum", 3, 0)  # the literal's constant goes with the refused call
    with pytest.raises(fusejit.UserError, match="does not fit in i8"):
        b.op("clamp", b.input("i", "i8", [3]), 5, 1000)  # cast(5, i8) goes too
    with pytest.raises(fusejit.UserError, match=r"'q\\x00r' is not a valid name"):
        b.input("q\x00r", "f32", [2])
    with pytest.raises(fusejit.UserError, match=r"use v.astype\(dtype\), or GraphBuilder.cast\(x, dtype\)"):
        b.op("cast", x)
    b.output("y", x * 1.0)
    with pytest.warns(fusejit.FusejitWarning, match="input 'i' is not used"):
        g = b.build()
    assert g.to_text() == "graph g\ninput x : f32[3]\ninput i : i8[3]\ny = x * 1.0\noutput y\n"


def test_outputs_of_one_value_and_row_constants_at_zero_size():
    """Two outputs of one value, and a value constant along a reduction's axes, are written (or
    empty) at dims of 0, on both plans."""
    b = fusejit.GraphBuilder()
    n = b.dim("N", 3)
    x = b.input("x", "f32", [n, 2])
    w = b.input("w", "f32", [2])
    v = x * 2
    b.output("a", v)
    b.output("c", v)
    b.output("s", b.reduce("sum", x, 0))
    b.output("y", w * 2)
    prog = fusejit.compile(b.build(), backend="cpu")
    for plan in ("fused", "unfused"):
        out = prog(x=np.ones((0, 2), np.float32), w=np.array([1.5, -2.0], np.float32), plan=plan)
        assert out["a"].shape == (0, 2) and out["c"].shape == (0, 2)
        assert bits(out["s"]) == bits(np.zeros(2, np.float32))
        assert bits(out["y"]) == bits(np.array([3.0, -4.0], np.float32))


def test_an_overflowing_shape_is_shown_whole():
    b = fusejit.GraphBuilder()
    c, big = b.dim("C", 7), b.dim("B", 2**40)
    with pytest.raises(fusejit.UserError, match=r"\[C=7, B=1099511627776, B=1099511627776, B=1099511627776, C=7\] "
                                                r"whose element count overflows 64 bits"):
        b.input("x", "f32", [c, big, big, big, c])


def test_empty_axis_composites_and_initial_match_numpy_and_torch():
    # softmax of nothing is empty and logsumexp -inf (torch); amax(initial=-inf) is NumPy's.
    b = fusejit.GraphBuilder()
    n = b.dim("N", 3)
    c = b.dim("C", 0)
    x = b.input("x", "f32", [n, c])
    b.output("s", b.reduce("softmax", x, -1))
    b.output("l", b.reduce("logsumexp", x, 1))
    b.output("m", b.reduce("amax", x, -1, initial=-np.inf))
    b.output("k", b.reduce("amin", x, -1, keepdim=True, initial=np.float32("inf")))
    g = b.build()
    assert any(nd.op == "amax" and nd.initial for nd in g.nodes)
    for dims in ({}, {"C": 5}):
        shape = (3, dims.get("C", 0))
        xs = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        r = fusejit.compile(g)(x=xs)
        assert r["s"].shape == shape
        ref_max = np.max(xs, -1, initial=-np.inf)
        assert bits(r["m"]) == bits(ref_max.astype(np.float32))
        assert bits(r["k"]) == bits(np.min(xs, -1, keepdims=True, initial=np.inf).astype(np.float32))
        m = np.where(np.isinf(ref_max), 0, ref_max)
        with np.errstate(divide="ignore"):
            lse = m + np.log(np.exp(xs.astype(np.float64) - m[:, None]).sum(-1))
        np.testing.assert_allclose(r["l"], lse, rtol=1e-6)
    with pytest.raises(fusejit.UserError, match="only amax's identity initial=-inf"):
        b2 = fusejit.GraphBuilder()
        b2.reduce("amax", b2.input("x", "f32", [2]), initial=0.0)
    with pytest.raises(TypeError, match="initial: expected a float"):
        b3 = fusejit.GraphBuilder()
        b3.reduce("amax", b3.input("x", "f32", [2]), initial="-inf")


def test_a_sum_of_negative_zeros_is_positive_zero_as_numpy_and_torch():
    # NumPy and PyTorch (CPU cascade_sum, CUDA reduce) start a sum from +0.0: a sum or mean of
    # -0.0 values is +0.0 (NumPy 2.4; its maintainers have called -0.0 the better start, numpy#21218,
    # so the expected value is written here, not taken from np.sum), over rows and columns, at
    # lengths on both sides of a warp (32), the lanes (256) and a chunk (8192). fusejit started
    # lanes from -0.0 and gave -0.0.
    text = "dim R = 2\ndim C = 3\ninput x : {dt}[R, C]\nr = sum(x, -1)\nc = sum(x, 0)\nm = mean(x, -1)\noutput r, c, m\n"
    for dt, npt in (("f32", np.float32), ("f64", np.float64), ("f16", np.float16)):
        prog = fusejit.compile(fusejit.Graph.parse(text.format(dt=dt)))
        for n in (1, 3, 33, 256, 257, 8193):
            for shape in ((2, n), (n, 2)):  # long rows; long columns
                x = np.full(shape, -0.0, npt)
                for plan in ("fused", "unfused"):
                    r = prog(x=x, plan=plan)
                    for name, want in (("r", shape[0]), ("c", shape[1]), ("m", shape[0])):
                        assert bits(r[name]) == bits(np.zeros(want, npt)), (dt, shape, plan, name)


def test_argmax_and_argmin_match_numpy_with_nan_ties_and_greedy_decoding():
    # The first best index, a NaN picked before any number by both (np.argmax, np.argmin; torch agrees),
    # one axis or the flattened tensor, i64; fused (greedy decoding: argmax of logits / T) and
    # unfused give the same indices.
    b = fusejit.GraphBuilder()
    v = b.dim("V", 7)
    x = b.input("x", "f32", [3, v])
    h = b.input("h", "bf16", [3, v])
    b.output("am", b.reduce("argmax", x, -1))
    b.output("an", b.reduce("argmin", x, 0, keepdim=True))
    b.output("af", b.reduce("argmax", x))
    b.output("ah", b.reduce("argmin", h, None))
    b.output("tok", b.reduce("argmax", x / 0.7, -1))
    prog = fusejit.compile(b.build())
    rng = np.random.default_rng(5)
    bf16 = fusejit.numpy_dtype("bf16")
    for n in (1, 7, 300, 8193):
        xs = rng.integers(-3, 4, (3, n)).astype(np.float32)  # many ties
        xs[1, n // 2] = np.nan
        hs = rng.standard_normal((3, n)).astype(bf16)
        for plan in ("fused", "unfused"):
            r = prog(x=xs, h=hs, plan=plan)
            assert r["am"].dtype == np.int64 and r["am"].shape == (3,)
            np.testing.assert_array_equal(r["am"], np.argmax(xs, -1))
            np.testing.assert_array_equal(r["an"], np.argmin(xs, 0, keepdims=True))
            assert r["af"] == np.argmax(xs)
            assert r["ah"] == np.argmin(hs.astype(np.float32))
            np.testing.assert_array_equal(r["tok"], np.argmax(xs / np.float32(0.7), -1))
    b2 = fusejit.GraphBuilder()
    with pytest.raises(fusejit.UserError, match="argmax takes one axis or none"):
        b2.reduce("argmax", b2.input("x", "f32", [2, 3]), [0, 1])


def test_dtype_objects_of_numpy_and_pytorch_name_fusejit_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = fusejit.GraphBuilder("d")
    x = b.input("x", np.float32, [4])
    w = b.input("w", ml_dtypes.bfloat16, [4])
    i = b.input("i", np.dtype("<i8"), [4])
    s = b.param("s", float, 2.0)  # np.dtype(float): float64
    b.output("y", b.cast(x * s, np.float16))
    b.output("z", b.cast(w, "f32") + b.cast(i, bool))
    g = b.build()
    assert [t.dtype for t in g.inputs] == ["f32", "bf16", "i64"]
    assert [t.dtype for t in g.outputs] == ["f16", "f32"]
    assert g.params[0].dtype == "f64"
    for bad, says in [(np.complex64, "no such dtype"), (np.dtype(">f4"), "big-endian"), (object, "no such dtype"),
                      (None, "dtype None"), (3, "no such dtype"), ("float32", "f32")]:
        with pytest.raises(fusejit.UserError, match=says):
            b.input("q", bad, [1])


def test_torch_dtypes_name_fusejit_dtypes():
    torch = pytest.importorskip("torch")
    assert fusejit.GraphBuilder("t").input("x", torch.bfloat16, [2]).dtype == "bf16"


def test_an_op_of_literals_only_folds_as_graph_text_does():
    b = fusejit.GraphBuilder()
    x = b.input("x", "f64", [3])
    folded = b.op("logaddexp", 1.0, 2.0)
    assert type(folded) is float and folded == 2 + math.log1p(math.exp(-1.0))  # f64, as text folds it
    assert b.op("add", 2, 3) == 5 and b.op("lt", 1, 2) is True
    # fusejit.op folds numbers alike: a traced function's rsqrt(head_dim) (a new user's find: a
    # UserError "no fusejit.Value among the operands").
    assert fusejit.op("rsqrt", 64.0) == 0.125 and fusejit.op("maximum", np.float32(2), 3) == 3.0
    f = fusejit.fuse(lambda v: v * fusejit.op("rsqrt", 64.0))
    assert f(np.full(2, 8.0, np.float32)).tolist() == [1.0, 1.0]
    for bad in ((), (np.ones(2),), (1.0, np.ones(2)), ("x",)):
        with pytest.raises(fusejit.UserError, match="no fusejit.Value among the operands: an op needs a graph value, or "
                                                    "numbers only"):
            fusejit.op("add", *bad) if len(bad) != 1 else fusejit.op("exp", *bad)
    b.output("y", x + folded)
    text = fusejit.Graph.parse("input x : f64[3]\ny = x + logaddexp(1.0, 2.0)\noutput y\n")
    assert b.build().to_text() == text.to_text()
