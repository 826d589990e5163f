#!/usr/bin/env python3
"""fusejit against its peers on the GPU, on the same tensors: every sample graph through fusejit,
PyTorch eager, torch.compile (default and mode="max-autotune-no-cudagraphs") and CuPy (cupy.fuse of
the generated code), each timed with CUDA events (median of --repeats after --warmup runs, up to
8 input sets rotated to make the inputs 4x the L2 cache: DRAM bandwidth, as fusejit's own timing,
for all but the smallest graphs, whose 8 sets stay under it), every result checked against fusejit's, and one table printed: each time and its ratio
to fusejit's (above 1 = slower than fusejit), and a device-to-device copy moving the bytes fusejit
moves (the bandwidth ceiling). fusejit writes into outputs allocated once (`out=`), as a serving loop
would; the PyTorch peers return new tensors on each call, from PyTorch's caching allocator (no
cudaMalloc after the first calls), and CuPy's from its memory pool.

The PyTorch and CuPy code is generated from each graph by fusejit.translate (one table entry per
op), never written per sample; python/tests/test_translate.py checks the generated code with
NumPy against fusejit on the CPU for every sample.

Needs a GPU, PyTorch and (for its column) CuPy; run by scripts/device-check.sh with the package
on PYTHONPATH. `--print-translation` works anywhere (no GPU): it prints the generated code.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Example: PYTHONPATH=build/python python3 bench/peers.py --only gpt2_gelu_tanh")
    ap.add_argument("graphs", nargs="*", help="graph files (default: every samples/graphs/*.txt)")
    ap.add_argument("--only", action="append", default=[], help="run only samples whose name contains this (repeatable)")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="override a dim in every graph that has it")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per peer; the median is reported (>= 20 recommended)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (torch.compile compiles in the first)")
    ap.add_argument("--skip", action="append", default=[], choices=["eager", "compile", "autotune", "cupy"],
                    help="leave a peer out (repeatable)")
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting new graphs after this many seconds (0 = none)")
    ap.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    ap.add_argument("--print-translation", action="store_true",
                    help="print the generated PyTorch and CuPy code of each graph and exit (no GPU needed)")
    args = ap.parse_args(argv)
    # Checked before any GPU work: a bad value otherwise failed every graph one by one.
    if args.repeats < 1 or args.warmup < 0 or args.budget_s < 0:
        ap.error("--repeats must be at least 1, --warmup and --budget-s at least 0")
    for d in args.dim:
        name, _, value = d.partition("=")
        if not name or not value.isdigit():
            ap.error(f"--dim {d}: expected NAME=VALUE with a whole number VALUE (e.g. --dim T=1024)")
    return args


def make_inputs(torch, g, ranges, gen):
    """Random device tensors for every input (floats uniform in the graph's range, else [-4, 4))."""
    from fusejit import torch_dtype

    out = {}
    for t in g.inputs:
        shape, dtype = tuple(t.shape), torch_dtype(t.dtype)
        if t.dtype == "bool":
            a = torch.rand(shape, device="cuda", generator=gen) < 0.5
        elif t.dtype in ("i8", "u8", "i32", "i64"):
            lo, hi = (0, 255) if t.dtype == "u8" else (-100, 100)
            a = torch.randint(lo, hi + 1, shape, device="cuda", generator=gen, dtype=dtype)
        else:
            lo, hi = ranges.get(t.name, (-4.0, 4.0))
            a = (torch.rand(shape, device="cuda", generator=gen) * (hi - lo) + lo).to(dtype)
        out[t.name] = a
    return out


class Timer:
    """CUDA-event timing of one call, with input sets rotated between runs to defeat the L2."""

    def __init__(self, torch, sets, repeats, warmup):
        self.torch, self.sets, self.repeats, self.warmup = torch, sets, repeats, warmup

    def __call__(self, call):
        torch = self.torch
        for k in range(max(self.warmup, len(self.sets))):
            call(self.sets[k % len(self.sets)])
        torch.cuda.synchronize()
        start = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeats)]
        stop = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeats)]
        for k in range(self.repeats):
            s = self.sets[k % len(self.sets)]
            start[k].record()
            call(s)
            stop[k].record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in zip(start, stop))


def to_numpy(torch, t):
    """A device tensor (torch or CuPy) as a NumPy array for checking (bf16 through ml_dtypes)."""
    if not isinstance(t, torch.Tensor):
        t = torch.from_dlpack(t)
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
    return t.cpu().numpy()


def peers(torch, g, params, args):
    """The peers' callables: name -> fn(inputs dict) -> tuple of outputs (errors: name -> message)."""
    import fusejit
    from fusejit.translate import translate

    fns, errors = {}, {}
    order = [p.name for p in g.params]
    fn_t = translate(g, "torch", device="cuda")
    tparams = {n: torch.tensor(v, device="cuda", dtype=fusejit.torch_dtype(d)) for n, (v, d) in params.items()}
    if "eager" not in args.skip:
        fns["eager"] = lambda s, f=fn_t: f(**s, **tparams)
    for name, mode in (("compile", None), ("autotune", "max-autotune-no-cudagraphs")):
        if name in args.skip:
            continue
        try:
            cf = torch.compile(fn_t, mode=mode) if mode else torch.compile(fn_t)
            fns[name] = lambda s, f=cf: f(**s, **tparams)
        except Exception as e:  # noqa: BLE001 - reported in the table
            errors[name] = f"{type(e).__name__}: {e}"
    if "cupy" not in args.skip:
        try:
            import cupy
            import numpy as np

            fn_c = translate(g, "cupy")
            fused = cupy.fuse(fn_c)
            cparams = [np.asarray(params[n][0], dtype=fusejit.numpy_dtype(params[n][1]))[()] for n in order]
            ins = [t.name for t in g.inputs]
            fns["cupy"] = lambda s: fused(*(cupy.from_dlpack(s[n]) for n in ins), *cparams)
        except Exception as e:  # noqa: BLE001
            errors["cupy"] = f"{type(e).__name__}: {e}"
    return fns, errors


def run_graph(torch, path, args, l2_bytes):
    import fusejit
    import fusejit.translate

    g = fusejit.Graph.load(str(path))
    dims = dict(d.split("=", 1) for d in args.dim)
    if any(d in g.dims for d in dims):
        g = g.with_dims({d: int(v) for d, v in dims.items() if d in g.dims})
    prog = fusejit.compile(g)
    gen = torch.Generator(device="cuda").manual_seed(0)
    base = make_inputs(torch, g, fusejit.translate.input_ranges(path.read_text()), gen)
    params = {p.name: (p.default, p.dtype) for p in g.params}
    per_set = sum(t.numel() * t.element_size() for t in base.values())
    nsets = max(1, min(8, -(-4 * l2_bytes // max(per_set, 1))))
    sets = [base] + [{k: v.clone() for k, v in base.items()} for _ in range(nsets - 1)]
    outs = {t.name: torch.empty(tuple(t.shape), device="cuda", dtype=fusejit.torch_dtype(t.dtype)) for t in g.outputs}
    pvals = {n: v for n, (v, _) in params.items()}
    want = prog(**base, **pvals)
    torch.cuda.synchronize()
    want_np = {n: to_numpy(torch, a) for n, a in want.items()}
    timer = Timer(torch, sets, args.repeats, args.warmup)
    row = {"graph": g.name or path.stem, "elements": max((a.numel() for a in want.values()), default=0),
           "bytes": sum(k.read_bytes + k.write_bytes for k in prog.kernels), "ms": {}, "check": {}}
    row["ms"]["fusejit"] = timer(lambda s: prog(**s, **pvals, out=outs))
    # As many source/destination pairs as input sets, rotated as they are (one pair of a small graph
    # would stay in L2, timing the copy faster than DRAM allows).
    pairs = [(src, torch.empty_like(src)) for src in
             (torch.empty(max(row["bytes"] // 2, 1), dtype=torch.uint8, device="cuda") for _ in sets)]
    row["ms"]["copy"] = Timer(torch, pairs, args.repeats, args.warmup)(lambda s: s[1].copy_(s[0]))
    fns, errors = peers(torch, g, params, args)
    row["check"].update({k: "error: " + v[:200] for k, v in errors.items()})
    from fusejit.translate import computed_in, mismatch

    precision = computed_in(g)  # an f32 value cast to f64 is compared at f32's tolerance
    for name, fn in fns.items():
        try:
            got = fn(base)
            torch.cuda.synchronize()
            bad = [f"{t.name}: {why}" for t, a in zip(g.outputs, got)
                   if (why := mismatch(to_numpy(torch, a), want_np[t.name], t.dtype, precision[t.name]))]
            row["check"][name] = "; ".join(bad) if bad else "ok"
            row["ms"][name] = timer(fn)
        except Exception as e:  # noqa: BLE001 - one failing peer must not end the run
            row["check"][name] = f"error: {type(e).__name__}: {str(e)[:200]}"
    return row


def print_table(rows):
    cols = ["fusejit", "eager", "compile", "autotune", "cupy", "copy"]
    head = ["graph", "fusejit ms", "eager", "torch.compile", "max-autotune", "CuPy fuse", "copy", "check"]
    lines = []
    for r in rows:
        f = r["ms"].get("fusejit")
        cells = [r["graph"], f"{f:.3f}" if f else "-"]
        for c in cols[1:]:
            ms = r["ms"].get(c)
            cells.append(f"{ms:.3f} ({ms / f:.2f}x)" if ms and f else "-")
        bad = {k: v for k, v in r["check"].items() if v != "ok"}
        cells.append("ok" if not bad else "; ".join(f"{k}: {v}" for k, v in bad.items())[:160])
        lines.append(cells)
    w = [max(len(str(x[i])) for x in lines + [head]) for i in range(len(head))]
    print("times in ms (median); (Nx) = time / fusejit's time; copy = device-to-device copy of the bytes fusejit moves")
    for cells in [head] + lines:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(cells)))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, str(ROOT / "build" / "python"))  # the build's package, unless PYTHONPATH has one
    import fusejit
    from fusejit.translate import generate

    paths = [pathlib.Path(p) for p in args.graphs] or sorted((ROOT / "samples" / "graphs").glob("*.txt"))
    paths = [p for p in paths if not args.only or any(o in p.stem for o in args.only)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        print(f"peers: no such graph file: {', '.join(missing)}" if missing else
              f"peers: no graph matches --only {' '.join(args.only)}", file=sys.stderr)
        return 2
    if args.print_translation:
        print("# c<N>: the graph's constants, which fn reads as globals: 0-d arrays of the dtype shown "
              "(fusejit.translate.generate's second result)")
        for p in paths:
            try:
                g = fusejit.Graph.load(str(p))
            except fusejit.UserError as e:
                print(f"peers: {e}", file=sys.stderr)
                return 2
            for backend in ("torch", "cupy"):
                print(f"# {p.stem} ({backend})\n{generate(g, backend)[0]}")
        return 0
    try:
        import torch
    except ImportError:
        print("peers: PyTorch is not installed here (the peers are PyTorch eager, torch.compile and CuPy "
              "on a GPU; --print-translation needs neither)", file=sys.stderr)
        return 2

    if not torch.cuda.is_available():
        print("peers: no CUDA device for PyTorch", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 64 << 20)
    print(f"device: {props.name}, L2 {l2 >> 20} MiB; torch {torch.__version__}; fusejit {fusejit.__version__}")
    rows, start, status = [], time.time(), 0
    for p in paths:
        if args.budget_s and time.time() - start > args.budget_s:
            print(f"peers: time budget spent; {p.stem} and later graphs not run")
            status = 1
            break
        try:
            row = run_graph(torch, p, args, l2)
        except Exception as e:  # noqa: BLE001
            row = {"graph": p.stem, "ms": {}, "check": {"fusejit": f"error: {type(e).__name__}: {e}"}}
        rows.append(row)
        if any(v != "ok" for v in row["check"].values()):
            status = 1
        print(f"  {row['graph']}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in row["ms"].items()), flush=True)
    print_table(rows)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
