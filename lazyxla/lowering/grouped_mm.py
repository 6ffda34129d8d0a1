"""Grouped matrix products (`torch._grouped_mm`, `F.grouped_mm`): the experts of a
Mixture-of-Experts layer, each applied to its own run of rows.

PyTorch's kernel off CUDA reads the offsets to the host and runs one `mm` per group on slices of
data-dependent sizes: on lazyxla that cut the graph at every MoE layer and made each new routing a
new program (Hugging Face's Mixtral: 3 compiles, 5 s, for one forward). Here the offsets stay on
the device: `lax.ragged_dot_general` computes every group at static shapes (XLA's own ragged dot
where the platform has one; on the CPU a masked dense product, which costs groups x the flops).

The four forms, with offs[g] the end of group g (a group starts where the one before ends):
  2d x 3d  a (M, K), b (G, K, N) -> (M, N): rows offs[g-1]:offs[g] of a times b[g]
  3d x 2d  a (G, M, K), b (K, N) -> (M, N): a[g] times columns offs[g-1]:offs[g] of b
  2d x 2d  a (M, K), b (K, N) -> (G, M, N): the slices offs[g-1]:offs[g] of K, one product each
  3d x 3d  a (G, M, K), b (G, K, N), no offs -> bmm
Rows (2d x 3d) or columns (3d x 2d) past offs[-1] are zeros here; eager leaves them unwritten.

The meta kernel PyTorch registers is CUDA's (bfloat16 inputs only); the CPU kernel takes float32,
bfloat16 and float16. lazyxla's meta kernel checks as the CPU kernel does, in its order and words.
"""
from __future__ import annotations

import jax.numpy as jnp
import torch
from jax import lax

from lazyxla.ir.meta import META_KERNELS
from lazyxla.jaxenv import cpp_type_name, type_name
from .linalg import product_dtype
from .registry import aten, register

_DTYPES = (torch.bfloat16, torch.float32, torch.float16)
# lhs rows ragged, rhs groups on dim 0 (2d x 3d); lhs contracting dim ragged (2d x 2d)
_RAGGED_ROWS = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), [0], [0])
_RAGGED_K = lax.RaggedDotDimensionNumbers((((1,), (0,)), ((), ())), [1], [])


def _check_strides(t):
    """Each operand row- or column-major in its last two dims, the long stride 16-byte aligned."""
    sizes, strides = t.shape[-2:], t.stride()[-2:]
    alignment = 16 // t.element_size()
    if strides[0] == 1 and strides[1] >= max(1, sizes[0]):
        long_stride = strides[1]
    elif strides[1] == 1 and strides[0] >= max(1, sizes[1]):
        long_stride = strides[0]
    else:
        raise RuntimeError(f"Invalid strides/sizes, got {list(t.stride())} for strides and "
                           f"{list(t.shape)} for sizes")
    if long_stride % alignment:
        raise RuntimeError("strides should be multiple of 16 bytes")


def _grouped_mm_meta(a, b, offs=None, bias=None, out_dtype=None):
    for name, t in (("mat_a", a), ("mat_b", b)):
        if t.dtype not in _DTYPES:
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got "
                               f"{type_name(t.dtype)}")
    for name, t in (("mat_a", a), ("mat_b", b)):
        if t.dim() not in (2, 3):
            raise RuntimeError(f"{name} has to be 2 or 3d")
    a2, b2 = a.dim() == 2, b.dim() == 2
    if a.shape[-1] != b.shape[-2]:
        # (eager checks this unless both are 2d: there it slices K by the offsets and accepts
        # unequal ones that reach; here the groups are masks over one shared K)
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    _check_strides(a)
    _check_strides(b)
    if (offs is not None) != (a2 or b2):
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both "
                           "matrices are 3d")
    if offs is not None and offs.dim() != 1:
        raise RuntimeError("offs has to be 1D")
    if offs is not None and offs.dtype != torch.int32:
        raise RuntimeError("Offsets have to be int32")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if (out_dtype or a.dtype) != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    if a2 and b2:
        shape = (offs.shape[0], a.shape[0], b.shape[1])
    elif a2 or b2:
        if offs.shape[0] != (b.shape[0] if a2 else a.shape[0]):
            raise RuntimeError("matrix batch sizes have to match")
        shape = (a.shape[0], b.shape[-1]) if a2 else (a.shape[1], b.shape[1])
    else:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError("batched dimension has to match")
        shape = (a.shape[0], a.shape[1], b.shape[-1])
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{cpp_type_name(a.dtype)} != {cpp_type_name(b.dtype)}")
    return a.new_empty(shape)


META_KERNELS[aten._grouped_mm.default] = _grouped_mm_meta


@register(aten._grouped_mm.default)
def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    dtype, acc = a.dtype, product_dtype(a.dtype)
    if acc != dtype:  # half inputs as float32 (exact): XLA's CPU dot thunk has no BF16 x BF16 = F32
        a, b = a.astype(acc), b.astype(acc)
    kw = dict(precision=lax.Precision.HIGHEST, preferred_element_type=acc)
    if offs is None:
        out = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), **kw)
    else:
        sizes = jnp.diff(offs.astype(jnp.int32), prepend=jnp.zeros(1, jnp.int32))
        if a.ndim == 2 and b.ndim == 3:
            out = lax.ragged_dot_general(a, b, sizes, _RAGGED_ROWS, **kw)
        elif a.ndim == 3:  # columns of b ragged: the 2d x 3d form, transposed
            out = lax.ragged_dot_general(b.T, jnp.swapaxes(a, 1, 2), sizes, _RAGGED_ROWS, **kw).T
        else:
            out = lax.ragged_dot_general(a, b, sizes, _RAGGED_K, **kw)
    return out.astype(dtype)
