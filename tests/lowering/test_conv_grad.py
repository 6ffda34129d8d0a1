"""Convolution weight gradients on the CPU backend (lowering/conv_grad.py): 1x1 kernels as one
matrix product, other 2-d convolutions summed over chunks of the batch. Same gradients as eager's
(as close to float64 as eager's), whichever form runs; the chunk sizes follow the work per sample."""
import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.lowering import conv_grad


def S(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _chunk(n, cin, cout, side, k, stride=1, dtype=jnp.float32):
    out = (side + 2 * (k // 2) - k) // stride + 1
    return conv_grad.batch_chunk(S(n, cin, side, side, dtype=dtype), S(cout, cin, k, k, dtype=dtype),
                                 S(n, cout, out, out, dtype=dtype), False)


def test_chunks_follow_the_work_per_sample():
    # a CIFAR ResNet's layers at batch 32: about 75M multiply-adds per float32 chunk
    assert _chunk(32, 32, 32, 32, 3) == 8
    assert _chunk(32, 64, 64, 16, 3) == 8
    assert _chunk(32, 32, 64, 32, 3, stride=2) == 16
    assert _chunk(32, 3, 32, 32, 3) == 32  # the stem: little work per sample, one convolution
    assert _chunk(32, 128, 128, 8, 3) == 32  # 8x8 outputs: no gain measured, one convolution
    assert _chunk(32, 32, 32, 32, 3, dtype=jnp.float64) == 4  # twice the bytes, half the chunk
    assert _chunk(64, 32, 32, 32, 3) == 8
    assert _chunk(128, 32, 32, 32, 3) == 16  # at most 8 chunks (each one more to compile),
    assert _chunk(256, 32, 32, 32, 3) == 256  # and none where that leaves them too large
    assert _chunk(16, 64, 64, 56, 3) == 2
    assert _chunk(1, 64, 64, 56, 3) == 1
    # 1-d and 3-d convolutions keep one convolution
    assert conv_grad.batch_chunk(S(32, 32, 4096), S(32, 32, 3), S(32, 32, 4096), False) == 32


def test_the_forms_apply_to_float32_and_float64_on_the_cpu_backend_only():
    assert conv_grad.applies(S(1)) and conv_grad.applies(S(1, dtype=jnp.float64))
    assert not conv_grad.applies(S(1, dtype=jnp.float16))
    assert not conv_grad.applies(S(1, dtype=jnp.bfloat16))
    assert not conv_grad.applies(S(1, dtype=jnp.complex64))
    w = jnp.zeros((4, 4, 1, 1))
    assert conv_grad.is_pointwise(w, (0, 0), 1, False)
    assert not conv_grad.is_pointwise(w, (1, 0), 1, False)  # padding: not one product
    assert not conv_grad.is_pointwise(w, (0, 0), 2, False)
    assert not conv_grad.is_pointwise(w, (0, 0), 1, True)
    assert not conv_grad.is_pointwise(jnp.zeros((4, 4, 3, 3)), (0, 0), 1, False)


@pytest.fixture
def spy(monkeypatch):
    """Small chunks (so that small shapes split) and a record of the forms that ran."""
    monkeypatch.setattr(conv_grad, "_CHUNK_MACS", 4e5)
    ran = []
    chunked, pointwise = conv_grad.chunked_weight_grad, conv_grad.pointwise_weight_grad

    def chunked_spy(weight_grad, x, g, m):
        ran.append(("chunks", x.shape[0], m))
        return chunked(weight_grad, x, g, m)

    def pointwise_spy(x, w, g, stride):
        ran.append(("product",))
        return pointwise(x, w, g, stride)
    monkeypatch.setattr(conv_grad, "chunked_weight_grad", chunked_spy)
    monkeypatch.setattr(conv_grad, "pointwise_weight_grad", pointwise_spy)
    return ran


def _gradients(conv, x, w, b, device):
    """Input, weight and bias gradients under a cotangent that differs per sample (a uniform one
    would hide chunks paired with another chunk's gradient)."""
    x, w = x.to(device).requires_grad_(), w.to(device).requires_grad_()
    b = b.to(device).requires_grad_() if b is not None else None
    y = conv(x, w, b)
    gy = torch.linspace(-2, 3, y.numel(), dtype=y.dtype).reshape(y.shape).cos().to(device)
    return [t.cpu() for t in torch.autograd.grad(y, [t for t in (x, w, b) if t is not None], gy)]


def _assert_as_close_as_eager(conv, x, w, b=None):
    ref = _gradients(conv, x.double(), w.double(), None if b is None else b.double(), "cpu")
    eager = _gradients(conv, x, w, b, "cpu")
    lazy = _gradients(conv, x, w, b, lazyxla.device())
    for r, e, z in zip(ref, eager, lazy):
        assert z.dtype == e.dtype and z.shape == e.shape
        scale = r.abs().max().item()
        slack = 1e-14 if x.dtype == torch.float64 else 1e-6  # float32 sums of a few hundred terms
        assert (z.double() - r).abs().max().item() <= 4 * (e.double() - r).abs().max().item() + slack * scale


# (batch, in, out, side, kernel, conv kwargs, transposed): unique shapes, so that each traces
CHUNKED = [  # (each at least 16x16 positions per sample: fewer keep one convolution)
    (6, 4, 6, 17, 3, dict(padding=1), False),
    (7, 4, 6, 33, 3, dict(stride=2, padding=1), False),  # 7 samples: chunks of unequal size
    (6, 4, 6, 19, 3, dict(padding=2, dilation=2), False),
    (6, 4, 6, 18, 3, dict(padding=1, groups=2), False),
    (6, 4, 4, 18, 5, dict(padding=2, groups=4), False),  # depthwise
    (6, 4, 6, 16, 3, dict(stride=2, padding=1, output_padding=1), True),
    (6, 4, 6, 16, 4, dict(stride=2, padding=1, groups=2), True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n,cin,cout,side,k,kw,transposed", CHUNKED)
def test_weight_gradients_summed_over_batch_chunks_match_eager(spy, dtype, n, cin, cout, side, k, kw,
                                                               transposed):
    torch.manual_seed(0)
    groups = kw.get("groups", 1)
    x = torch.randn(n, cin, side, side, dtype=dtype)
    w = torch.randn(*((cin, cout // groups) if transposed else (cout, cin // groups)), k, k, dtype=dtype)
    b = torch.randn(cout, dtype=dtype)
    conv = (lambda x, w, b: F.conv_transpose2d(x, w, b, **kw)) if transposed else \
        (lambda x, w, b: F.conv2d(x, w, b, **kw))
    _assert_as_close_as_eager(conv, x, w, b)
    assert any(r[0] == "chunks" and r[1] == n and r[2] < n for r in spy), spy


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape,kw", [
    ((5, 6, 14, 13), dict(stride=1)),
    ((5, 6, 15, 13), dict(stride=2)),  # an odd side: the last row of samples is not read
    ((5, 6, 16, 17), dict(stride=(3, 2))),
    ((5, 6, 21), dict(stride=2)),  # 1-d
    ((3, 6, 5, 6, 7), dict(stride=2)),  # 3-d
])
def test_1x1_weight_gradients_are_one_matrix_product_and_match_eager(spy, dtype, shape, kw):
    torch.manual_seed(1)
    nd = len(shape) - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    x = torch.randn(*shape, dtype=dtype)
    w = torch.randn(7, shape[1], *(1,) * nd, dtype=dtype)
    _assert_as_close_as_eager(lambda x, w, b: conv(x, w, b, **kw), x, w, torch.randn(7, dtype=dtype))
    assert ("product",) in spy


def test_half_precision_weight_gradients_keep_one_convolution(spy):
    torch.manual_seed(2)
    x, w = torch.randn(6, 4, 16, 15).half(), torch.randn(6, 4, 3, 3).half()
    x_d, w_d = x.to(lazyxla.device()).requires_grad_(), w.to(lazyxla.device()).requires_grad_()
    y = F.conv2d(x_d, w_d, padding=1)
    y.sum().backward()
    assert w_d.grad.cpu().dtype == torch.float16
    assert not spy


@pytest.mark.parametrize("k", [1, 3])
def test_an_empty_batch_gives_zero_weight_gradients(k):
    x = torch.zeros(0, 4, 8, 8, device=lazyxla.device(), requires_grad=True)
    w = torch.ones(6, 4, k, k).to(lazyxla.device()).requires_grad_()
    F.conv2d(x, w, padding=k // 2).sum().backward()
    assert x.grad.shape == (0, 4, 8, 8)
    torch.testing.assert_close(w.grad.cpu(), torch.zeros(6, 4, k, k))
