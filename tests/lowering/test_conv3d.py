"""3-d convolutions on the CPU backend as sums of 2-d convolutions over the depth taps, transposed
ones as their transpose (lowering/conv3d.py): the forward and all three gradients as close to
float64 as eager's, for strides, padding, output padding, dilation, groups and kernels of any
depth."""
import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.lowering import conv3d


@pytest.fixture
def spy(monkeypatch):
    ran = []
    taps = conv3d.conv3d_by_depth_taps

    def taps_spy(x, w, *args):
        ran.append(tuple(w.shape))
        return taps(x, w, *args)
    monkeypatch.setattr(conv3d, "conv3d_by_depth_taps", taps_spy)
    return ran


def _results(conv, x, w, b, kw, device):
    x, w, b = (t.to(device).requires_grad_() for t in (x, w, b))
    y = conv(x, w, b, **kw)
    gy = torch.linspace(-2, 3, y.numel(), dtype=y.dtype).reshape(y.shape).cos().to(device)
    return [y.detach().cpu()] + [t.cpu() for t in torch.autograd.grad(y, (x, w, b), gy)]


# (batch, in, out, size, kernel, conv3d kwargs): each shape its own, so that each traces
CASES = [
    (2, 4, 6, (5, 9, 8), 3, dict(padding=1)),
    (3, 4, 6, (7, 9, 8), 3, dict(stride=2, padding=1)),
    (2, 4, 6, (9, 9, 7), 3, dict(padding=2, dilation=2)),
    (2, 4, 6, (5, 8, 7), (3, 1, 1), dict(padding=(1, 0, 0))),  # a temporal kernel
    (2, 4, 6, (5, 7, 8), (1, 3, 3), dict(padding=(0, 1, 1))),  # one depth tap
    (2, 4, 6, (5, 9, 8), (2, 1, 1), dict(stride=(1, 2, 3))),  # 1x1 taps: matrix products
    (2, 4, 4, (5, 8, 9), 3, dict(groups=4, padding=1)),  # depthwise
    (2, 4, 6, (6, 8, 8), (2, 3, 4), dict(stride=(2, 1, 3), padding=(1, 0, 2), dilation=(2, 1, 1))),
    (2, 4, 6, (3, 5, 6), 3, dict()),  # one output plane
]
# transposed: (batch, in, out, size, kernel, conv_transpose3d kwargs)
TRANSPOSED = [
    (2, 4, 6, (3, 5, 4), 3, dict(stride=2, padding=1, output_padding=1)),
    (2, 4, 6, (4, 5, 5), 2, dict(stride=2)),
    (2, 4, 6, (3, 4, 5), 3, dict(padding=1)),
    (3, 4, 6, (3, 4, 4), (3, 2, 3), dict(stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2),
                                         dilation=(1, 2, 1))),
    (2, 4, 6, (3, 5, 4), 3, dict(stride=2, groups=2, output_padding=1)),
    (2, 4, 6, (3, 5, 6), (3, 1, 1), dict(stride=(2, 1, 1))),
]


def _check(conv, n, cin, cout, size, k, kw, dtype, transposed):
    torch.manual_seed(0)
    k = (k,) * 3 if isinstance(k, int) else k
    groups = kw.get("groups", 1)
    x = torch.randn(n, cin, *size, dtype=dtype)
    w = torch.randn(*((cin, cout // groups) if transposed else (cout, cin // groups)), *k, dtype=dtype)
    b = torch.randn(cout, dtype=dtype)
    ref = _results(conv, x.double(), w.double(), b.double(), kw, "cpu")
    eager = _results(conv, x, w, b, kw, "cpu")
    lazy = _results(conv, x, w, b, kw, lazyxla.device())
    slack = 1e-14 if dtype == torch.float64 else 1e-6
    for r, e, z in zip(ref, eager, lazy):
        assert z.dtype == e.dtype and z.shape == e.shape
        assert (z.double() - r).abs().max() <= 4 * (e.double() - r).abs().max() + slack * r.abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,cin,cout,size,k,kw", CASES)
def test_3d_convolutions_and_their_gradients_match_eager(spy, dtype, n, cin, cout, size, k, kw):
    _check(F.conv3d, n, cin, cout, size, k, kw, dtype, False)
    assert spy, "the 3-d convolution was not lowered as depth taps"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,cin,cout,size,k,kw", TRANSPOSED)
def test_transposed_3d_convolutions_and_their_gradients_match_eager(spy, dtype, n, cin, cout, size, k,
                                                                    kw):
    _check(F.conv_transpose3d, n, cin, cout, size, k, kw, dtype, True)
    assert spy, "the transposed 3-d convolution was not lowered through depth taps"


def test_an_output_padding_past_the_stride_keeps_xlas_transposed_convolution(spy):
    """PyTorch allows an output padding up to the dilation: there the convolution of the output
    size does not give the input's size back, so the transpose does not apply."""
    kw = dict(stride=1, padding=0, output_padding=1, dilation=2, groups=2)
    _check(F.conv_transpose3d, 2, 4, 4, (3, 4, 3), 2, kw, torch.float32, True)
    assert not spy


def test_an_empty_batch_and_a_kernel_deeper_than_the_input():
    x, w = torch.zeros(0, 2, 4, 5, 5), torch.ones(3, 2, 3, 3, 3)
    y = F.conv3d(x.to(lazyxla.device()), w.to(lazyxla.device()), padding=1)
    assert y.shape == F.conv3d(x, w, padding=1).shape and y.cpu().numel() == 0
    x, w = torch.zeros(1, 2, 2, 6, 5), torch.ones(3, 2, 3, 1, 1)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv3d(x, w)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv3d(x.to(lazyxla.device()), w.to(lazyxla.device()))


def test_the_depth_taps_apply_to_float32_and_float64_convolutions_on_the_cpu_backend_only():
    S = jax.ShapeDtypeStruct
    w = S((4, 4, 3, 3, 3), jnp.float32)
    assert conv3d.applies(S((1,), jnp.float32), w, 3)
    assert conv3d.applies(S((1,), jnp.float64), w, 3)
    assert conv3d.applies(S((1,), jnp.float32), S((4, 4, 3, 1, 1), jnp.float32), 3)
    assert not conv3d.applies(S((1,), jnp.float32), S((4, 4, 1, 1, 1), jnp.float32), 3)
    assert not conv3d.applies(S((1,), jnp.float32), S((4, 4, 3, 3), jnp.float32), 2)
    assert not conv3d.applies(S((1,), jnp.float16), w, 3)
    assert not conv3d.applies(S((1,), jnp.bfloat16), w, 3)
