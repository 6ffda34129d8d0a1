"""Eager's words for the shape and dtype errors users meet most (cat, stack, layer_norm,
embedding, where, masked_fill, topk, ...), where PyTorch's Python meta kernels word them otherwise
("Number of dimensions of tensors must match.  Expected 2-D tensors, but got 3-D for tensor number
1 in the list" for eager's "Tensors must have same number of dimensions: got 2 and 3"). Checked
in eager's order, before the meta kernel runs; tests/lowering/test_error_messages.py compares them
with eager word for word."""
from __future__ import annotations

import torch

from lazyxla.jaxenv import cpp_type_name, tensor_type_name, type_name
from .checks import _dim_in_range, check, fail, ops_named

aten = torch.ops.aten


def _wrap(x, dim):
    """dim wrapped as eager wraps it (its IndexError when out of range)."""
    _dim_in_range(x, dim)
    return dim % max(x.dim(), 1)


def _one_device(tensors):
    """A 0-d CPU tensor among the device's ones: arithmetic takes it as a number, a list of
    tensors to join does not (eager's CUDA cat raises)."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        cpu = torch.device("cpu")
        device = next(d for d in devices if d != cpu)
        fail(f"Expected all tensors to be on the same device, but found at least two devices, "
             f"{device} and {cpu}!")


@check(aten.cat.default)
def _cat(tensors, dim=0):
    _one_device(tensors)
    for i, t in enumerate(tensors):
        if t.dim() == 0:
            fail(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # eager skips legacy empty tensors (1-d, no elements) and compares the rest with the first
    kept = [(i, t) for i, t in enumerate(tensors) if not (t.dim() == 1 and t.numel() == 0)]
    if not kept:
        return
    ref = kept[0][1]
    d = _wrap(ref, dim)
    for i, t in kept[1:]:
        if t.dim() != ref.dim():
            fail(f"Tensors must have same number of dimensions: got {ref.dim()} and {t.dim()}")
        for k in range(ref.dim()):
            if k != d and t.shape[k] != ref.shape[k]:
                fail(f"Sizes of tensors must match except in dimension {d}. Expected size "
                     f"{ref.shape[k]} but got size {t.shape[k]} for tensor number {i} in the list.")


@check(aten.stack.default)
def _stack(tensors, dim=0):
    _one_device(tensors)
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            fail(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                 f"entry 0 and {list(t.shape)} at entry {i}")


@check(aten.max_pool2d_with_indices.default, aten.max_pool2d.default)
def _max_pool2d(x, *args, **kwargs):
    if x.dim() not in (3, 4):  # (PyTorch's meta kernel asks for size(-3) first: an IndexError)
        fail("non-empty 3D or 4D (batch mode) tensor expected for input")


@check(aten.multi_margin_loss.default)
def _multi_margin_loss(x, target, *args, **kwargs):
    if not ((x.dim() <= 1 and x.numel() != 0) or (x.dim() == 2 and x.shape[1] != 0)):
        fail(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
             f"{list(x.shape)}")
    samples = 1 if x.dim() <= 1 else x.shape[0]
    if target.dim() > 1 or target.numel() != samples:
        fail(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of "
             f"input samples (batch size). Expected target size [{samples}], but got "
             f"{list(target.shape)}. Input has shape {list(x.shape)}.")


@check(aten.native_layer_norm.default)
def _layer_norm(x, normalized_shape, weight, bias, eps):
    shape = list(normalized_shape)
    if not shape:
        fail("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
             "element, but got normalized_shape = []")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != shape:
            fail(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                 f"{list(t.shape)} and normalized_shape = {shape}")
    if x.dim() < len(shape) or list(x.shape[x.dim() - len(shape):]) != shape:
        fail(f"Given normalized_shape={shape}, expected input with shape "
             f"[*{''.join(f', {n}' for n in shape)}], but got input of size{list(x.shape)}")


@check(aten.embedding.default)
def _embedding(weight, indices, *args, **kwargs):
    if weight.dim() != 2:
        fail("'weight' must be 2-D")
    if indices.dtype not in (torch.int64, torch.int32):
        got = tensor_type_name(type_name(indices.dtype))
        fail("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
             f"Long, Int; but got {got} instead (while checking arguments for embedding)")


@check(*ops_named("where"))
def _where(condition, *args, **kwargs):
    if isinstance(condition, torch.Tensor) and condition.dtype not in (torch.bool, torch.uint8):
        fail(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
             f"{type_name(condition.dtype)}")


@check(*ops_named("masked_fill", "masked_fill_"))
def _masked_fill(x, mask, value):
    if mask.dtype != torch.bool:
        fail(f"masked_fill_ only supports boolean masks, but got mask with dtype "
             f"{cpp_type_name(mask.dtype)}")


@check(*ops_named("topk"))
def _topk(x, k, dim=-1, *args, **kwargs):
    d = _wrap(x, dim)
    if not 0 <= k <= (x.shape[d] if x.dim() else 1):
        fail("selected index k out of range")


@check(aten.trace.default)
def _trace(x):
    if x.dim() != 2:
        fail(f"trace: expected a matrix, but got tensor with dim {x.dim()}")


def _square(name):
    def fn(a, *args, **kwargs):
        if a.dim() < 2:
            fail(f"{name}: The input tensor A must have at least 2 dimensions.")
        if a.shape[-1] != a.shape[-2]:
            fail(f"{name}: A must be batches of square matrices, but they are {a.shape[-2]} by "
                 f"{a.shape[-1]} matrices")
    return fn


check(aten.linalg_inv_ex.default)(_square("linalg.inv"))  # (eager's inv_ex says linalg.inv)
check(aten._linalg_det.default)(_square("linalg.det"))


@check(aten.roll.default)
def _roll(x, shifts, dims=()):
    if len(shifts) != len(dims) and not (len(dims) == 0 and len(shifts) == 1):
        fail(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")


@check(aten.flip.default)
def _flip(x, dims):
    seen = set()
    for d in dims:
        wrapped = _wrap(x, d)
        if wrapped in seen:
            fail(f"dim {wrapped} appears multiple times in the list of dims")
        seen.add(wrapped)


@check(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def _grid_sampler(x, grid, *args, **kwargs):
    if x.dim() == grid.dim() and grid.shape[-1] != x.dim() - 2:
        fail(f"grid_sampler(): expected grid to have size {x.dim() - 2} in last dimension, but got "
             f"grid with sizes {list(grid.shape)}")


def _plain_index(x, index, source) -> bool:
    """An index and source that pass eager's checks before its count check."""
    return index.dim() <= 1 and index.dtype in (torch.int64, torch.int32) and x.dtype == source.dtype


@check(*ops_named("index_add", "index_add_"))
def _index_add(x, dim, index, source, **kwargs):
    d = _wrap(x, dim)
    if not _plain_index(x, index, source):
        return  # (eager's earlier checks: the meta kernel's words are theirs)
    length = source.shape[d] if source.dim() else 1
    if index.numel() != length:
        fail(f"index_add_(): Number of indices ({index.numel()}) should be equal to "
             f"source.size(dim): ({length}), for dim: {d}")


@check(*ops_named("index_copy", "index_copy_"))
def _index_copy(x, dim, index, source):
    d = _wrap(x, dim)
    if not _plain_index(x, index, source) or source.dim() != x.dim():
        return
    length = source.shape[d] if source.dim() else 1
    if index.numel() != length:
        fail(f"index_copy_(): Number of indices ({index.numel()}) should be equal to "
             f"source.size(dim) ({length})", IndexError)


@check(*ops_named("masked_scatter", "masked_scatter_"))
def _masked_scatter(x, mask, source):
    if x.dtype != source.dtype:  # (eager's missing space)
        fail(f"masked_scatter: expected self and source to have same dtypes but got"
             f"{type_name(x.dtype)} and {type_name(source.dtype)}")


@check(aten.mean.default, aten.mean.dim)
def _mean(x, *args, dtype=None, **kwargs):
    if dtype is None and not (x.dtype.is_floating_point or x.dtype.is_complex):
        fail("mean(): could not infer output dtype. Input dtype must be either a floating point or "
             f"complex dtype. Got: {type_name(x.dtype)}")


def _sizes(size, *args, **kwargs):
    for n in size:
        if n < 0:
            fail(f"Trying to create tensor with negative dimension {n}: {list(size)}")


check(*ops_named("randn", "rand"))(_sizes)


@check(*ops_named("zeros"))
def _zeros(size, *args, **kwargs):
    if any(n < 0 for n in size):
        fail("zeros: Dimension size must be non-negative.")


@check(aten.repeat.default)
def _repeat(x, repeats):
    # eager multiplies the sizes out first and names the first negative result (a negative
    # repeat of an empty dim it accepts; PyTorch's meta kernel, and so lazyxla, does not)
    if len(repeats) >= x.dim():
        sizes = [1] * (len(repeats) - x.dim()) + list(x.shape)
        target = [s * r for s, r in zip(sizes, repeats)]
        for n in target:
            if n < 0:
                fail(f"Trying to create tensor with negative dimension {n}: {target}")
