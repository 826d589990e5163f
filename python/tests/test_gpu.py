"""GPU tensors (PyTorch and CuPy) on a non-default stream: no synchronisation, in place, strided
views. Skipped without a GPU or without the framework; run by scripts/device-check.sh."""

from __future__ import annotations

import pytest

import fusejit

GRAPH = """graph gpu_axpy
dim R = 64
dim C = 4096
input x : f32[R, C]
input y : f32[R, C]
param a : f32 = 2.0
z = a * x + y
output z
"""


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    return torch


@pytest.fixture(scope="module")
def prog():
    p = fusejit.compile(fusejit.Graph.parse(GRAPH))
    if p.backend != "cuda":
        pytest.skip(f"no GPU: {p.backend_note}")
    return p


def test_torch_stream_no_sync(prog):
    torch = _torch()
    x = torch.randn(64, 4096, device="cuda")
    y = torch.randn(64, 4096, device="cuda")
    torch.cuda.synchronize()  # the inputs are ready before the side stream uses them
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time queued ahead of the launch
        z = prog(x=x, y=y, a=3.0)["z"]
        # The call returned while the stream is still busy: it enqueued, never synchronised.
        assert not s.query()
    s.synchronize()
    assert torch.equal(z, 3.0 * x + y)


def test_torch_in_place_and_views(prog):
    torch = _torch()
    x = torch.randn(4096, 64, device="cuda").t()  # transposed: strided path
    y = torch.randn(64, 4096, device="cuda")
    want = 2.0 * x + y
    prog(x=x, y=y, out={"z": y})
    torch.cuda.synchronize()
    assert torch.equal(y, want)
    buf = torch.empty(4096, 64, device="cuda")
    prog(x=x, y=want, out={"z": buf.t()})
    torch.cuda.synchronize()
    assert torch.equal(buf.t(), 2.0 * x + want)


def test_torch_bf16(prog):
    torch = _torch()
    g = fusejit.Graph.parse("dim N = 1000\ninput x : bf16[N]\ny = x * 2 + 1\noutput y")
    p = fusejit.compile(g)
    x = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
    y = p(x=x)["y"]
    torch.cuda.synchronize()
    assert y.dtype == torch.bfloat16 and torch.equal(y, x * 2 + 1)


def test_cupy_stream_in_place_and_views(prog):
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no CUDA device for CuPy")
    x = cupy.random.standard_normal((64, 4096), dtype=cupy.float32)
    y = cupy.random.standard_normal((64, 4096), dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        z = prog(x=x, y=y)["z"]
        assert isinstance(z, cupy.ndarray)
    s.synchronize()
    assert bool((z == 2.0 * x + y).all())
    xt = cupy.ascontiguousarray(x.T).T  # same values, transposed layout
    with s:
        prog(x=xt, y=y, out={"z": y})
    s.synchronize()
    assert bool((y == z).all())


def test_numpy_on_gpu_program(prog):
    import numpy as np

    x = np.random.default_rng(1).standard_normal((64, 4096), dtype=np.float32)
    assert np.array_equal(prog(x=x, y=x)["z"], np.float32(2) * x + x)


def test_fused_function_on_torch_tensors():
    """fusejit.fuse on CUDA tensors: torch tensors out on their device; fused and unfused the same
    bits on the GPU, and close to the CPU path (exp and tanh within their documented ulp)."""
    torch = _torch()
    import numpy as np

    def body(x, w):
        return fusejit.reduce("softmax", x * w, -1), np.tanh(x) * w

    gpu = fusejit.fuse(body)
    cpu = fusejit.fuse(backend="cpu")(body)
    x = torch.randn(33, 1000, device="cuda")
    w = torch.rand(1000, device="cuda") + 0.5
    prog = gpu.program(x, w)
    if prog.backend != "cuda":
        pytest.skip("no GPU for fusejit")
    p, t = gpu(x, w)
    unfused = prog(x, w, plan="unfused")
    torch.cuda.synchronize()
    assert p.is_cuda and p.shape == (33, 1000)
    assert torch.equal(p, unfused["out0"]) and torch.equal(t, unfused["out1"])
    pc, tc = cpu(x.cpu().numpy(), w.cpu().numpy())
    assert np.allclose(p.cpu().numpy(), pc, rtol=1e-5, atol=1e-9) and np.allclose(t.cpu().numpy(), tc, rtol=1e-6)


def test_torch_tensors_on_a_second_gpu():
    """Tensors on cuda:1 while the current device is 0 launch on their own device (its current
    stream); tensors on two GPUs in one call are refused. Needs two GPUs."""
    torch = _torch()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    prog = fusejit.compile(fusejit.Graph.parse(GRAPH))
    if prog.backend != "cuda":
        pytest.skip("no GPU for fusejit")
    x = torch.randn(64, 4096, device="cuda:1")
    y = torch.randn(64, 4096, device="cuda:1")
    with torch.cuda.device(0):
        z = prog(x=x, y=y, a=3.0)["z"]
    torch.cuda.synchronize(1)
    assert z.device == x.device and torch.equal(z, 3.0 * x + y)
    with pytest.raises(fusejit.UserError, match="on device 0, the tensors before it on device 1"):
        prog(x=x, y=y.to("cuda:0"))
