"""The weight gradient of a convolution on XLA's CPU backend, in the form its CPU runtime computes
fastest.

The gradient w.r.t. the weight is a convolution whose window is the whole image and whose output
is the kernel (3x3): a contraction over batch x height x width. Handed to XLA as one such
convolution (what `jax.vjp` of the forward gives), the CPU runtime (YNNPACK, or Eigen for float64)
slows down far more than its work grows once that contraction outgrows the caches: on an Intel Xeon
(2 MB L2 per core) a ResNet's 32->32-channel 3x3 layer at 32x32, batch 32, took 19 ms against eager's
5.1, and 7 ms as 4 convolutions of 8 samples each, whose gradients add up to the same sum. So:
  - 1x1 kernels (no padding, one group): the gradient is one matrix product over batch and
    positions (2.7-8x faster than the convolution on the 1x1 layers measured);
  - other 2-d convolutions (and 3-d ones, which conv3d.py computes as 2-d ones) with at least
    256 output positions per sample: the batch is cut into chunks of about `_CHUNK_MACS`
    multiply-adds each, at most `_MAX_CHUNKS` (each chunk is one more convolution to compile:
    about 30-50 ms of XLA time), and kept whole where that many chunks would each hold over
    twice that work (no gain measured). Fitted on one machine over 18 layer shapes (3 to 256
    channels, 4x4 to 112x112 images, batches of 4 to 64); the optimum follows the caches, so
    other CPUs may prefer other sizes (not measured on another CPU yet).
    `benchmarks/convolutions.py` measures both forms per layer and on a ResNet's step.
Float32 and float64 only (float16/bfloat16 keep the one convolution and its one rounding), and
only on the CPU backend: GPU and TPU convolution libraries have their own weight-gradient kernels.
The chunks' sum adds the per-sample contributions in another order than one convolution does,
which is as close to exact (the differential tests compare both with eager)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

_CHUNK_MACS = 75e6 * 4  # multiply-adds per chunk, times bytes per element (float32: 75e6)
_MAX_CHUNKS = 8
_MIN_POSITIONS = 256  # fewer positions per sample (8x8 images): no gain measured, one convolution
_DTYPES = (jnp.float32, jnp.float64)


def applies(x) -> bool:
    return x.dtype in _DTYPES and jax.default_backend() == "cpu"


def is_pointwise(w, padding, groups, transposed) -> bool:
    """A 1x1 kernel with no padding and one group: the convolution is a matrix product."""
    return (not transposed and groups == 1 and all(k == 1 for k in w.shape[2:])
            and all(p == 0 for p in padding))


def pointwise_weight_grad(x, w, g, stride):
    """dW[o, i] = sum over batch and output positions of g[n, o, ...] * x[n, i, positions * stride]."""
    nd = x.ndim - 2
    sel = (slice(None), slice(None)) + tuple(slice(0, o * s, s) for o, s in zip(g.shape[2:], stride))
    xs = x[sel]
    dims = (0,) + tuple(range(2, 2 + nd))
    d = lax.dot_general(g, xs, ((dims, dims), ((), ())), precision=lax.Precision.HIGHEST)
    return d.reshape(w.shape).astype(w.dtype)


def batch_chunk(x, w, g, transposed) -> int:
    """Samples per chunk (x.shape[0]: one convolution) for the weight gradient of a 2-d
    convolution, or of a 3-d one that conv3d.py computes as 2-d ones (the caller asks for those
    only)."""
    n = x.shape[0]
    if not (x.ndim == 4 or (x.ndim == 5 and not transposed)) or n < 2:
        return n
    # per sample, each weight meets every output position (transposed: every input position)
    positions = math.prod((x if transposed else g).shape[2:])
    macs = positions * math.prod(w.shape)
    if macs == 0 or positions < _MIN_POSITIONS:
        return n
    m = max(1, round(_CHUNK_MACS / jnp.dtype(x.dtype).itemsize / macs))
    fewest = -(-n // _MAX_CHUNKS)
    if fewest > 2 * m:  # chunks that large gain nothing (batch 256 at 32x32: 8 of 32 were slower)
        return n
    return min(max(m, fewest), n)


def chunked_weight_grad(weight_grad, x, g, m: int):
    """The sum of `weight_grad(x chunk, g chunk)` over chunks of `m` samples."""
    if m >= x.shape[0]:  # (also an empty batch: m is 0)
        return weight_grad(x, g)
    total = None
    for start in range(0, x.shape[0], m):
        part = weight_grad(lax.slice_in_dim(x, start, min(start + m, x.shape[0])),
                           lax.slice_in_dim(g, start, min(start + m, g.shape[0])))
        total = part if total is None else total + part
    return total
