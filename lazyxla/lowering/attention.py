"""The two kernels under PyTorch's fused attention fast path: `_masked_softmax` (with its backward)
and `_transform_bias_rescale_qkv`.

nn.MultiheadAttention and nn.TransformerEncoderLayer take that path in inference (eval mode, no
autograd, batch_first) on the devices PyTorch names there: the CPU, CUDA and the PrivateUse1
backend, so lazyxla's tensors too. device/decompositions.py builds `_native_multi_head_attention`
and `_transformer_encoder_layer_fwd` from these two as eager's CPU kernels do.

_masked_softmax(x, mask, dim, mask_type): softmax over `dim` leaving out the positions where the
boolean `mask` is True (0 in the result; a row with nothing left is NaN, as eager's is). The mask
lines up with x (B, H, L, L) by mask_type: 0, an (L, L) attention mask for every batch and head;
1, a (B, L) key padding mask; 2, a mask of x's own shape (also any mask that is not 2-d, or x not
4-d). Eager's CPU kernel checks a type-0 or type-1 mask against L only, not against the key length
x.size(3), and reads it out of line when they differ: here that raises.

PyTorch registers no meta kernel for either op. The ones here check what the CPU kernels check, in
their order and words, and raise where the CPU kernel would read out of bounds or reinterpret
memory (a bias of the wrong length or dtype)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from lazyxla.ir.meta import META_KERNELS
from lazyxla.jaxenv import type_name
from .checks import _dim_in_range, _require
from .registry import aten, register

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _require_float(dtype, kernel):
    _require(dtype, kernel, lambda d: d in _FLOATS)


def _dim(dim, ndim):
    """The softmax dim, None for the last (the meta kernels have checked its range)."""
    return (ndim - 1 if dim is None else dim) % max(ndim, 1)


def _mask_layout(x_shape, mask_shape, mask_type):
    """The shape the mask broadcasts from: (1, 1, L, L) for type 0, (B, 1, 1, L) for type 1, the
    mask's own for type 2. Raises eager's errors (and where eager reads out of line)."""
    if len(mask_shape) != 2 or len(x_shape) != 4:
        mask_type = 2  # (eager: types 0 and 1 only for a 2-d mask over a 4-d input)
    if mask_type == 2:
        if tuple(x_shape) != tuple(mask_shape):
            raise RuntimeError("For mask_type == 2 mask shape should match input shape")
        return tuple(mask_shape)
    if mask_type == 1:
        if (x_shape[0], x_shape[2], x_shape[3]) != (mask_shape[0], mask_shape[1], mask_shape[1]):
            raise RuntimeError("For mask_type == 1 mask shape should be (B, L)")
        return (mask_shape[0], 1, 1, mask_shape[1])
    if mask_type == 0:
        if (x_shape[2], x_shape[2], x_shape[3]) != (mask_shape[0], mask_shape[1], mask_shape[1]):
            raise RuntimeError("For mask_type == 0 mask shape should be (L, L)")
        return (1, 1) + tuple(mask_shape)
    return None  # undefined or unknown type: the meta kernel raises after the dim and dtype checks


def _masked_softmax_meta(x, mask, dim=None, mask_type=None):
    if mask.dtype != torch.bool:
        raise RuntimeError("Mask should be a boolean tensor")
    _mask_layout(x.shape, mask.shape, mask_type)
    _dim_in_range(x, x.dim() - 1 if dim is None else dim)
    _require_float(x.dtype, "masked_softmax")
    if mask_type is None:
        raise RuntimeError("Mask Type should be defined")
    if mask_type not in (0, 1, 2):
        raise RuntimeError("Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 "
                           "(default_mask)")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _masked_softmax_backward_meta(grad, output, mask, dim=None):
    if tuple(grad.shape) != tuple(mask.shape):
        raise RuntimeError("Mask shape should match grad shape")
    if mask.dtype != torch.bool:
        raise RuntimeError("Mask should be a boolean tensor")
    _dim_in_range(grad, output.dim() - 1 if dim is None else dim)
    _require_float(grad.dtype, "masked_softmax_backward")
    if output.shape != grad.shape or output.dtype != grad.dtype:  # (eager reads it as grad's)
        raise RuntimeError(f"expected the output of _masked_softmax, of grad's shape "
                           f"{list(grad.shape)} and dtype {type_name(grad.dtype)}; got "
                           f"{list(output.shape)} and {type_name(output.dtype)}")
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


def _transform_bias_rescale_qkv_meta(qkv, qkv_bias, num_head):
    if qkv.dim() < 3:
        _dim_in_range(qkv, 2)  # eager's IndexError (it reads qkv.size(2))
    if qkv.dim() > 3:
        raise RuntimeError(f"_transform_bias_rescale_qkv: expected a 3-D `qkv` (B, T, 3 * D), "
                           f"got {qkv.dim()}-D")
    b, t, three_d = qkv.shape
    if num_head <= 0:
        raise RuntimeError(f"_transform_bias_rescale_qkv: num_head must be positive, got {num_head}")
    d = three_d // 3
    for holds, what in ((d % num_head == 0, "D % num_head == 0"), (three_d % 3 == 0, "_3D % 3 == 0")):
        if not holds:
            raise RuntimeError(f"Expected {what} to be true, but got false.  (Could this error "
                               "message be improved?  If so, please report an enhancement request "
                               "to PyTorch.)")
    _require_float(qkv.dtype, "transform_bias_rescale_qkv")
    if qkv_bias.numel() != three_d:
        raise RuntimeError(f"_transform_bias_rescale_qkv: expected a `qkv_bias` of {three_d} "
                           f"elements (3 * D), got {qkv_bias.numel()}")
    if qkv_bias.dtype != qkv.dtype:
        raise RuntimeError(f"expected scalar type {type_name(qkv.dtype)} but found "
                           f"{type_name(qkv_bias.dtype)}")
    out = qkv.new_empty((3 * b, num_head, t, d // num_head))
    return out[:b], out[b:2 * b], out[2 * b:]


META_KERNELS[aten._masked_softmax.default] = _masked_softmax_meta
META_KERNELS[aten._masked_softmax_backward.default] = _masked_softmax_backward_meta
META_KERNELS[aten._transform_bias_rescale_qkv.default] = _transform_bias_rescale_qkv_meta


def _acc(dtype):
    return jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype


@register(aten._masked_softmax.default)
def masked_softmax(x, mask, dim=None, mask_type=None):
    layout = _mask_layout(x.shape, mask.shape, mask_type)
    keep = ~jnp.broadcast_to(mask.reshape(layout), x.shape)
    d, shape = _dim(dim, x.ndim), x.shape
    if x.ndim == 0:
        x, keep = x.reshape(1), keep.reshape(1)
    # as eager's kernel: the exponentials in x's dtype, their sum and its reciprocal in the
    # accumulation dtype; a row with nothing kept sums to 0 and gives NaN
    top = jnp.max(jnp.where(keep, x, -jnp.inf), axis=d, keepdims=True)
    e = jnp.where(keep, jnp.exp((x - top.astype(x.dtype)).astype(_acc(x.dtype))).astype(x.dtype), 0)
    total = jnp.sum(e.astype(_acc(x.dtype)), axis=d, keepdims=True)
    out = e.astype(_acc(x.dtype)) * jnp.where(total == 0, jnp.nan, 1 / total)
    return out.astype(x.dtype).reshape(shape)


@register(aten._masked_softmax_backward.default)
def masked_softmax_backward(grad, output, mask, dim=None):
    d = _dim(output.ndim - 1 if dim is None else dim, grad.ndim)
    shape = grad.shape
    if grad.ndim == 0:
        grad, output, mask, d = grad.reshape(1), output.reshape(1), mask.reshape(1), 0
    acc = _acc(grad.dtype)
    products = jnp.where(mask, 0, grad * output).astype(acc)
    total = jnp.sum(products, axis=d, keepdims=True)
    out = jnp.where(mask, 0, output.astype(acc) * (grad.astype(acc) - total))
    return out.astype(grad.dtype).reshape(shape)


@register(aten._transform_bias_rescale_qkv.default)
def transform_bias_rescale_qkv(qkv, qkv_bias, num_head):
    b, t, three_d = qkv.shape
    d = three_d // 3
    dh = d // num_head
    # eager: the root of dh (as the dtype) taken in float (double for double), its reciprocal in
    # double, rounded to the dtype
    root = np.sqrt(np.asarray(np.asarray(dh, qkv.dtype), _acc(qkv.dtype)))
    inv = jnp.asarray(np.asarray(1.0 / float(root)).astype(qkv.dtype))
    x = qkv + qkv_bias.reshape(three_d)
    heads = x.reshape(b, t, 3, num_head, dh).transpose(2, 0, 3, 1, 4)  # (3, B, H, T, dh)
    return heads[0] * inv, heads[1], heads[2]

