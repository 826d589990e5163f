#!/usr/bin/env python3
"""The memory-bound parts of a Llama decoder layer and of a decode step's sampling, written as
plain Python functions and fused by ``fusejit.fuse``: residual add + RMSNorm (two outputs), SwiGLU,
rotary embedding (rotate-half, in place on the query through two strided views) and softmax
with a temperature plus the greedy token. Each result is checked against NumPy in float64, and
each function's kernel count is printed (fused, and unfused: one kernel per op).

    build/venv/bin/python samples/python/llama_decode.py [--tokens 8] [--hidden 4096]

The defaults are decode-sized (8 tokens, Llama-3-8B's widths); they run on the CPU path without a
GPU in a few seconds once compiled. bf16 needs the ml_dtypes package (scripts/setup.sh installs it).
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np

import fusejit

BF16 = ml_dtypes.bfloat16


@fusejit.fuse
def add_rmsnorm(x, residual, w, eps=1e-5):
    """h = x + residual (the new residual stream) and RMSNorm(h) * w; bf16 in, f32 accumulation."""
    h = x + residual
    hf = h.astype("f32")
    y = (hf * fusejit.op("rsqrt", (hf * hf).mean(-1, keepdims=True) + eps)).astype("bf16") * w
    return {"h": h, "y": y}


@fusejit.fuse
def swiglu(gate, up):
    return fusejit.op("silu", gate) * up


@fusejit.fuse
def rope(q1, q2, cos, sin):
    """Rotate-half RoPE on the two halves of each head (strided views of one array)."""
    return q1 * cos - q2 * sin, q2 * cos + q1 * sin


@fusejit.fuse
def sample_greedy(logits, temperature):
    """Softmax of logits / temperature and the most likely token (one kernel over the vocabulary)."""
    return fusejit.reduce("softmax", logits / temperature, -1), np.argmax(logits, -1)


def bf16_ulps(got: np.ndarray, want: np.ndarray) -> int:
    """The largest distance in bf16 ulps between `got` and float64 `want` rounded to bf16."""
    a = got.view(np.uint16).astype(np.int32)
    b = want.astype(np.float32).astype(BF16).view(np.uint16).astype(np.int32)
    ka = np.where(a & 0x8000, 0x8000 - a, a)  # monotone integers for signed bf16 bit patterns
    kb = np.where(b & 0x8000, 0x8000 - b, b)
    return int(np.abs(ka - kb).max())


def kernels(f: fusejit.Fused, *args) -> str:
    p = f.program(*args)
    return f"{len(p.kernels)} kernel(s) fused, {len(p.unfused_kernels)} unfused"


def check_norm(rng: np.random.Generator, T: int, H: int) -> None:
    x, res = (rng.standard_normal((T, H)).astype(BF16) for _ in range(2))
    w = (1 + 0.1 * rng.standard_normal(H)).astype(BF16)
    out = add_rmsnorm(x, res, w)
    h = x.astype(np.float64) + res.astype(np.float64)
    hb = h.astype(np.float32).astype(BF16).astype(np.float64)  # h is stored as bf16, then normalised
    y = (hb / np.sqrt((hb * hb).mean(-1, keepdims=True) + 1e-5)).astype(np.float32).astype(BF16)
    y = y.astype(np.float64) * w.astype(np.float64)
    print(f"add_rmsnorm [{T}, {H}]: {kernels(add_rmsnorm, x, res, w)}; h within "
          f"{bf16_ulps(out['h'], h)} bf16 ulp, y within {bf16_ulps(out['y'], y)} bf16 ulp of float64")
    # y rounds twice, the normalised value to bf16 and its product with w: a normalised value a
    # fraction of an f32 ulp from a bf16 tie may round the other way (1 bf16 ulp), and w < 1 can
    # move the product into the binade below, where that is 2 (row 25 of 128 tokens, seed 0).
    assert bf16_ulps(out["h"], h) == 0 and bf16_ulps(out["y"], y) <= 2


def check_swiglu(rng: np.random.Generator, T: int, F: int) -> None:
    gate, up = (rng.standard_normal((T, F)).astype(BF16) for _ in range(2))
    got = swiglu(gate, up)
    g = gate.astype(np.float64)
    want = (g / (1 + np.exp(-g))).astype(np.float32).astype(BF16).astype(np.float64) * up.astype(np.float64)
    print(f"swiglu [{T}, {F}]: {kernels(swiglu, gate, up)}; within {bf16_ulps(got, want)} bf16 ulp of float64 "
          "with silu rounded to bf16 first (as PyTorch's bf16 silu)")
    assert bf16_ulps(got, want) <= 1


def check_rope(rng: np.random.Generator, T: int, heads: int, D: int) -> None:
    q = rng.standard_normal((T, heads, D)).astype(np.float32)
    pos = np.arange(T, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D)
    cos, sin = np.cos(pos)[:, None, :].astype(np.float32), np.sin(pos)[:, None, :].astype(np.float32)
    q1, q2 = q[..., : D // 2], q[..., D // 2 :]  # strided views: read in place, no copy
    want = np.concatenate([q1 * cos.astype(np.float64) - q2 * sin, q2 * cos.astype(np.float64) + q1 * sin], -1)
    prog = rope.program(q1, q2, cos, sin)
    prog(q1, q2, cos, sin, out=[q1, q2])  # in place: each element reads its pair, then writes it
    err = float(np.abs(q - want).max())
    print(f"rope [{T}, {heads}, {D}] in place: {kernels(rope, q1, q2, cos, sin)}; max error {err:.2e}")
    assert err < 1e-5


def check_sampling(rng: np.random.Generator, T: int, V: int) -> None:
    logits = (3 * rng.standard_normal((T, V))).astype(np.float32)
    p, token = sample_greedy(logits, 0.7)
    z = logits.astype(np.float64) / np.float64(np.float32(0.7))  # the literal takes the logits' dtype
    e = np.exp(z - z.max(-1, keepdims=True))
    rel = float(np.abs(p - e / e.sum(-1, keepdims=True)).max() / p.max())
    print(f"sample_greedy [{T}, {V}]: {kernels(sample_greedy, logits, 0.7)}; softmax within {rel:.1e} "
          f"(relative to the largest), tokens {'equal' if np.array_equal(token, logits.argmax(-1)) else 'DIFFER'}")
    assert rel < 1e-5 and np.array_equal(token, logits.argmax(-1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8, help="rows (tokens in the batch)")
    ap.add_argument("--hidden", type=int, default=4096, help="model width")
    ap.add_argument("--ffn", type=int, default=14336, help="SwiGLU width")
    ap.add_argument("--vocab", type=int, default=128256, help="vocabulary size")
    args = ap.parse_args()
    # A head of 128 (Llama's) or the whole width when it is smaller, in pairs (rotate-half): the
    # width must split into whole heads; and at least one token and one vocabulary entry.
    if args.tokens < 1 or args.ffn < 1 or args.vocab < 1 or args.hidden < 2:
        ap.error("--tokens, --ffn and --vocab must be at least 1, --hidden at least 2")
    if args.hidden % min(128, args.hidden) or min(128, args.hidden) % 2:
        ap.error(f"--hidden {args.hidden}: give an even width up to 128 or a multiple of 128 (heads of 128)")
    rng = np.random.default_rng(0)
    check_norm(rng, args.tokens, args.hidden)
    check_swiglu(rng, args.tokens, args.ffn)
    head = min(128, args.hidden)  # Llama's head dim, or the whole width when it is smaller
    check_rope(rng, args.tokens, args.hidden // head, head)
    check_sampling(rng, args.tokens, args.vocab)
    print(f"all checks passed on {swiglu.program(np.ones((1, 2), BF16), np.ones((1, 2), BF16)).target}")


if __name__ == "__main__":
    main()
