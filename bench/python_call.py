#!/usr/bin/env python3
"""The Python layer's cost per call of a compiled program, in µs, for a few call forms on tiny
NumPy arrays (N = 4, CPU path unless --backend cuda), next to the extension's launch alone (the
floor the Python layer adds to). Each figure is the best of --repeats rounds of --calls calls
(the minimum filters other processes' noise). Prints a table; asserts nothing.

    PYTHONPATH=build/python build/venv/bin/python bench/python_call.py [--calls 2000] [--repeats 25]

(build/venv is the virtual environment scripts/setup.sh makes, with NumPy.)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusejit

GRAPH = "graph t\ndim N = 4\ninput v : f32[N]\nparam k : f32 = 2.0\nw = v * k\noutput w\n"


def best_us(fn, calls: int, repeats: int) -> float:
    """The best mean µs per call of `fn` over `repeats` rounds of `calls` calls."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def forms(p: fusejit.Program, fused: fusejit.Fused) -> list[tuple[str, object]]:
    """(label, zero-argument callable) for each call form measured."""
    v = np.arange(4, dtype=np.float32)
    o = np.empty(4, np.float32)
    io = v.copy()
    wide = np.arange(8, dtype=np.float32)
    view, oview = wide[::2], np.empty(8, np.float32)[::2]
    out = {"w": o}
    ext = p._p  # the extension's program: launch(inputs, in_as, outputs, out_as, params, stream, plan)
    return [
        ("extension launch alone (floor)", lambda: ext.launch([v], [None], [o], [None], [], 0, "fused")),
        ("p(v=v, out={'w': o})", lambda: p(v=v, out={"w": o})),
        ("p(v=v, out=out)  (dict reused)", lambda: p(v=v, out=out)),
        ("p(v, out={'w': o})  (positional)", lambda: p(v, out={"w": o})),
        ("p(v=v, k=3.0, out={'w': o})  (param)", lambda: p(v=v, k=3.0, out={"w": o})),
        ("p(v=v)  (output allocated)", lambda: p(v=v)),
        ("p(v=view, out={'w': oview})  (strided)", lambda: p(v=view, out={"w": oview})),
        ("p(v=io, out={'w': io})  (in place)", lambda: p(v=io, out={"w": io})),
        ("p(v)  (positional, output allocated)", lambda: p(v)),
        ("fuse: f(v)  (the same graph, traced)", lambda: fused(v)),
        ("fuse: f(v=v)  (a keyword argument)", lambda: fused(v=v)),
    ]


def _fused(backend: str) -> fusejit.Fused:
    """GRAPH as a fused Python function (the param as a literal): fuse's lookup on top of p(v)."""
    return fusejit.fuse(backend=backend)(lambda v: v * 2.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per round (1 to 10^7)")
    ap.add_argument("--repeats", type=int, default=25, help="rounds; the best is reported (1 to 1000)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "auto"])
    args = ap.parse_args()
    if not 1 <= args.calls <= 10**7 or not 1 <= args.repeats <= 1000:
        ap.error("--calls must be 1 to 10^7 and --repeats 1 to 1000 (11 kinds of call are timed each round)")
    try:
        p = fusejit.compile(fusejit.Graph.parse(GRAPH), backend=args.backend)
    except fusejit.Error as e:  # --backend cuda without a GPU: its message, not a traceback
        raise SystemExit(f"python_call: {e}") from None
    print(f"fusejit {fusejit.__version__}, {p.target}; best of {args.repeats} x {args.calls} calls")
    for label, fn in forms(p, _fused(args.backend)):
        fn()  # warm: first-call work (specializations, imports) stays out of the figure
        print(f"  {label:42s} {best_us(fn, args.calls, args.repeats):7.2f} µs/call")


if __name__ == "__main__":
    main()
