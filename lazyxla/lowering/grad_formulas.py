"""Gradient formulas that do not read the device.

Some of PyTorch's backward formulas look at values on the host to pick a path, or select with a
mask (a result whose size depends on the data). On lazyxla each such read synced the step in the
middle of the backward (and `nonzero` ran on the CPU). lazyxla registers autograd kernels for
those ops that compute every case with the same ops; PyTorch itself takes such paths for tensor
subclasses and CUDA tensors:

- prod: each element's gradient is the product of the elements before it times the product of
  those after it (two exclusive cumulative products), exact with zeros. (PyTorch counted the
  zeros: two reads, then `nonzero` on the CPU.)
- cumprod, first order: before the first zero of a slice, eager's own `sum_{k>=j} g_k y_k / x_j`;
  at the first zero, the same sum with that zero taken as 1; after it, 0 (every product holds the
  first zero). Where the gradient must itself be differentiable (create_graph, or a traced
  backward), the exact O(n^2) form PyTorch uses there: for each j, the cumulative product with
  x_j taken as 1. (PyTorch asked `(x == 0).any()`: NeRF's transmittance, stick-breaking weights.)
- max(), min(), median(), nanmedian() of a whole tensor: the gradient spread evenly over the
  elements equal to the result (NaN counting as equal to a NaN result), as CUDA's formula.
  (PyTorch's CPU formula read whether the result is NaN.)
- masked_scatter's source: element i gets the gradient at the i-th selected position, found by
  a running count of the mask (PyTorch selected with masked_select: VLMs merging image features).
- masked_fill's and index_fill's tensor value: the sum of the gradient where the value was
  written (PyTorch's index_fill formula ran `_unique` on the CPU).
- index_put's values where the index is one boolean mask (`x[mask] = v`, `x[:, mask] = v`;
  wav2vec2's learned mask embedding): the sum of the gradient under the mask where v is broadcast
  over the selected elements, else, as for masked_scatter, the gradient at the i-th selected
  element. (PyTorch's `grad[mask]` has a size that depends on the data: the mask was read and the
  indexing ran on the CPU.) Other indices keep PyTorch's formula.
- cross_entropy with class targets, a weight and label smoothing, mean-reduced: PyTorch's
  composite with the targets' weight sum taken by a masked gather, as it takes it for tensor
  subclasses (it summed `weight.gather(0, target.masked_select(...))`: a read and a CPU fallback).
"""
from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad

aten = torch.ops.aten


def _below_autograd():
    return torch._C._AutoDispatchBelowAutograd()


def _others_product(x, dim):
    """For each element along dim, the product of the other elements."""
    n = x.shape[dim]
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    before = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    after = torch.cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return before * after


def _prod_backward(grad, x, dim, keepdim):
    if x.dim() == 0:
        return grad
    if dim is None:  # the whole tensor: one dim of every element
        return _prod_backward(grad.reshape(1), x.reshape(-1), 0, True).reshape(x.shape)
    if not keepdim:
        grad = grad.unsqueeze(dim)
    if x.numel() == 0 or x.shape[dim] == 1:
        return grad.expand(x.shape)
    return grad * _others_product(x, dim).conj()


class _Prod(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        with _below_autograd():
            out = (aten.prod.default(x, dtype=dtype) if dim is None
                   else aten.prod.dim_int(x, dim, keepdim, dtype=dtype))
        ctx.save_for_backward(x)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dim = None if ctx.dim is None else ctx.dim % max(x.dim(), 1)
        g = _prod_backward(grad, x.to(grad.dtype), dim, ctx.keepdim)
        return g.to(x.dtype), None, None, None


def _reversed_cumsum(t, dim):
    return t.flip(dim).cumsum(dim).flip(dim)


def _cumprod_backward(grad, x, y, dim):
    """First order: O(n), branch-free (masks from the zeros' running count)."""
    zero = x == 0
    count = zero.cumsum(dim)
    before, first = count == 0, zero & (count == 1)
    one = torch.ones((), dtype=x.dtype, device=x.device)
    head = _reversed_cumsum(grad * y.conj(), dim) / torch.where(before, x, one).conj()
    skipped = torch.where(first, one, x).cumprod(dim)  # products with the first zero taken as 1
    at_first = _reversed_cumsum(grad * skipped.conj(), dim)
    return torch.where(before, head, torch.where(first, at_first, torch.zeros_like(head)))


def _cumprod_backward_differentiable(grad, x, dim):
    """grad_j = sum_{k>=j} g_k prod_{i<=k, i!=j} x_i, as a differentiable formula: O(n^2)."""
    xm, gm = x.movedim(dim, -1), grad.movedim(dim, -1)
    n = xm.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=x.device)
    one = torch.ones((), dtype=x.dtype, device=x.device)
    products = torch.where(eye, one, xm.unsqueeze(-2)).cumprod(-1)  # [..., j, k]
    later = torch.ones(n, n, dtype=torch.bool, device=x.device).triu()  # k >= j
    out = (torch.where(later, products, torch.zeros_like(products)).conj() * gm.unsqueeze(-2)).sum(-1)
    return out.movedim(-1, dim)


class _Cumprod(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, dtype):
        with _below_autograd():
            y = aten.cumprod.default(x, dim, dtype=dtype)
        ctx.save_for_backward(x, y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        xg = x.to(grad.dtype)
        if x.numel() <= 1 or x.dim() == 0:
            return grad.to(x.dtype), None, None
        dim = ctx.dim % x.dim()
        if x.shape[dim] == 1:
            return grad.to(x.dtype), None, None
        if torch.is_grad_enabled():
            g = _cumprod_backward_differentiable(grad, xg, dim)
        else:
            g = _cumprod_backward(grad, xg, y.to(grad.dtype), dim)
        return g.to(x.dtype), None, None


def _needs_grad(x) -> bool:
    return torch.is_grad_enabled() and x.requires_grad


def _prod(x, *, dtype=None):
    if not _needs_grad(x):
        with _below_autograd():
            return aten.prod.default(x, dtype=dtype)
    return _Prod.apply(x, None, False, dtype)


def _prod_dim(x, dim, keepdim=False, *, dtype=None):
    if not _needs_grad(x):
        with _below_autograd():
            return aten.prod.dim_int(x, dim, keepdim, dtype=dtype)
    return _Prod.apply(x, dim, keepdim, dtype)


def _cumprod(x, dim, *, dtype=None):
    if not _needs_grad(x):
        with _below_autograd():
            return aten.cumprod.default(x, dim, dtype=dtype)
    return _Cumprod.apply(x, dim, dtype)


def _evenly_distributed(grad, x, value):
    """The gradient of a whole-tensor max/min/median: spread over the elements equal to it."""
    mask = (x == value) | (x.isnan() & value.isnan())
    return torch.where(mask, grad / mask.sum(), _zero(grad))


def _zero(like):
    return torch.zeros((), dtype=like.dtype, device=like.device)


def _unwritten(grad, mask, shape):
    """The gradient of the input a masked write kept where the mask does not hold (summed to the
    input's shape where the mask broadcast it)."""
    g = grad.masked_fill(mask, 0)
    return g if g.shape == shape else g.sum_to_size(shape)


class _Select(torch.autograd.Function):
    """max(), min(), median(), nanmedian(): one element's value (or several equal ones)."""
    @staticmethod
    def forward(ctx, op, x):
        with _below_autograd():
            value = op(x)
        ctx.save_for_backward(x, value)
        return value

    @staticmethod
    def backward(ctx, grad):
        x, value = ctx.saved_tensors
        return None, _evenly_distributed(grad, x, value)


def _masked_write(op, written_grad):
    """The autograd Function of op(x, mask, written), a write of `written` where mask holds:
    x's gradient is kept where it does not; written_grad(grad, mask, shape, dtype) gives
    written's."""
    class MaskedWrite(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, mask, written):
            with _below_autograd():
                out = op(x, mask, written)
            ctx.save_for_backward(mask)
            ctx.shape, ctx.written = x.shape, (written.shape, written.dtype)
            return out

        @staticmethod
        def backward(ctx, grad):
            mask = ctx.saved_tensors[0].to(grad.device)  # (a 0-dim CPU mask goes with any device)
            grad_x = _unwritten(grad, mask, ctx.shape) if ctx.needs_input_grad[0] else None
            grad_written = written_grad(grad, mask, *ctx.written) if ctx.needs_input_grad[2] else None
            return grad_x, None, grad_written
    return MaskedWrite


def _in_selection_order(values, selected, count, dim):
    """The slices of `values` along dim where `selected` (1-d) holds, in order, as `count` slices
    (zeros past the last selected one): a gather whose size does not depend on the data."""
    position = selected.cumsum(0) - 1
    # unselected slices (and any past the count) go to a spare slot, dropped after
    target = torch.where(selected & (position < count), position, torch.full_like(position, count))
    shape = list(values.shape)
    shape[dim] = count + 1
    return values.new_zeros(shape).index_add(dim, target, values).narrow(dim, 0, count)


def _masked_scatter_source_grad(grad, mask, source_shape, dtype):
    """Source element i took the i-th selected position: its gradient is the gradient there."""
    n = 1
    for d in source_shape:
        n *= d
    selected = mask.expand(grad.shape).reshape(-1)
    return _in_selection_order(grad.reshape(-1), selected, n, 0).reshape(source_shape)


def _masked_fill_value_grad(grad, mask, shape, dtype):
    return torch.where(mask, grad, _zero(grad)).sum().to(dtype)


_MaskedScatter = _masked_write(aten.masked_scatter.default, _masked_scatter_source_grad)
_MaskedFill = _masked_write(aten.masked_fill.Tensor, _masked_fill_value_grad)  # a 0-dim value


class _IndexFill(torch.autograd.Function):
    """index_fill with a 0-dim tensor value."""
    @staticmethod
    def forward(ctx, x, dim, index, value):
        with _below_autograd():
            out = aten.index_fill.int_Tensor(x, dim, index, value)
        ctx.save_for_backward(index)
        ctx.dim, ctx.value_dtype = dim, value.dtype
        return out

    @staticmethod
    def backward(ctx, grad):
        index = ctx.saved_tensors[0].to(grad.device)
        grad_x = grad_value = None
        if ctx.needs_input_grad[0]:
            grad_x = grad.index_fill(ctx.dim, index, 0)
        if ctx.needs_input_grad[3]:
            written = grad.new_zeros(grad.shape, dtype=torch.bool).index_fill(ctx.dim, index, True)
            grad_value = torch.where(written, grad, _zero(grad)).sum().to(ctx.value_dtype)
        return grad_x, None, None, grad_value


class _IndexPut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, values, accumulate, inplace, *indices):
        if inplace:  # below the version counter's bump too: mark_dirty bumps it, once as in eager
            with torch._C._AutoDispatchBelowADInplaceOrView():
                out = aten.index_put_.default(x, list(indices), values, accumulate)
            ctx.mark_dirty(x)
        else:
            with _below_autograd():
                out = aten.index_put.default(x, list(indices), values, accumulate)
        ctx.save_for_backward(*[i for i in indices if i is not None])
        ctx.given = [i is not None for i in indices]
        ctx.accumulate, ctx.values_shape = accumulate, values.shape
        return out

    @staticmethod
    def backward(ctx, grad):
        saved = iter(ctx.saved_tensors)  # (CPU indices, which indexing takes, moved along)
        indices = [next(saved).to(grad.device) if given else None for given in ctx.given]
        grad_x = grad_values = None
        if ctx.needs_input_grad[0]:
            grad_x = grad if ctx.accumulate else aten.index_put.default(
                grad, indices, grad.new_zeros(ctx.values_shape), False)
        if ctx.needs_input_grad[1]:
            grad_values = _index_put_values_grad(grad, indices, ctx.values_shape)
        return (grad_x, grad_values, None, None) + (None,) * len(indices)


def _index_put_values_grad(grad, indices, values_shape):
    """The gradient of index_put's values: what the index selects from grad, summed to the values'
    shape; for one boolean mask, without a result whose size depends on the data."""
    given = [k for k, i in enumerate(indices) if i is not None]
    mask = indices[given[0]] if len(given) == 1 else None
    if mask is None or mask.dtype not in (torch.bool, torch.uint8) or any(
            i is not None for i in indices[:given[0]]):
        return aten.index.Tensor(grad, indices).sum_to_size(values_shape)
    k, d = given[0], mask.dim()
    mask = mask.bool()
    rest = tuple(grad.shape[k + d:])
    rank = k + 1 + len(rest)  # the selection's rank: the dims before, the count, the dims after
    padded = (1,) * (rank - len(values_shape)) + tuple(values_shape)
    expanded = mask.reshape(mask.shape + (1,) * len(rest))
    if padded[k] == 1:  # one value for every selected element: the sum under the mask
        summed = torch.where(expanded, grad, _zero(grad)).sum(tuple(range(k, k + d)), keepdim=False)
        return summed.unsqueeze(k).sum_to_size(values_shape)
    # a value per selected element, in order: the i-th selected one's gradient
    flat = grad.reshape(tuple(grad.shape[:k]) + (-1,) + rest)
    return _in_selection_order(flat, mask.reshape(-1), padded[k], k).sum_to_size(values_shape)


def _index_putting(inplace):
    op = aten.index_put_.default if inplace else aten.index_put.default

    def kernel(x, indices, values, accumulate=False):
        if not torch.is_grad_enabled() or not (x.requires_grad or values.requires_grad):
            with _below_autograd():
                return op(x, indices, values, accumulate)
        if inplace and x.is_leaf and x.requires_grad:  # (eager's words; mark_dirty's differ)
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        return _IndexPut.apply(x, values, accumulate, inplace, *indices)
    return kernel


def _differentiable(op, function, tensors):
    """op's autograd kernel: `function` (an autograd Function taking op's arguments) where one of
    the arguments at positions `tensors` needs a gradient, else op itself below autograd."""
    def kernel(*args):
        if torch.is_grad_enabled() and any(args[i].requires_grad for i in tensors):
            return function.apply(*args)
        with _below_autograd():
            return op(*args)
    return kernel


def _selecting(op):
    def kernel(x):
        if not _needs_grad(x):
            with _below_autograd():
                return op(x)
        return _Select.apply(op, x)
    return kernel


_AUTOGRAD = torch.library.Library("aten", "IMPL")


def _register(name, kernel):
    """kernel as name's autograd kernel on lazyxla (it returns NotImplemented for the calls it
    leaves to PyTorch's own kernel). Under torch.func's transforms, PyTorch's own kernel runs
    instead: functorch knows its formulas at every level (forward mode too), not a
    Python autograd.Function called from inside an op's kernel."""
    original = torch.library.get_kernel("aten::" + name, "AutogradPrivateUse1")

    def dispatched(keys, *args, **kwargs):
        # (a forward-AD dual level: the Functions here have no jvp, and a dual input that does
        # not require grad would lose its tangent below autograd)
        if torch._C._are_functorch_transforms_active() or _forward_ad._current_level >= 0:
            return original.call_boxed(keys, *args, **kwargs)
        out = kernel(*args, **kwargs)
        return original.call_boxed(keys, *args, **kwargs) if out is NotImplemented else out
    _AUTOGRAD.impl(name, dispatched, "AutogradPrivateUse1", with_keyset=True)


for _name in ("max", "min", "median", "nanmedian"):
    _register(_name, _selecting(getattr(aten, _name).default))
_register("masked_scatter", _differentiable(aten.masked_scatter.default, _MaskedScatter, (0, 2)))
_register("masked_fill.Tensor", _differentiable(aten.masked_fill.Tensor, _MaskedFill, (0, 2)))
_register("index_fill.int_Tensor", _differentiable(aten.index_fill.int_Tensor, _IndexFill, (0, 3)))
_register("index_put", _index_putting(False))
_register("index_put_", _index_putting(True))


def _cross_entropy(x, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    """cross_entropy with class targets, a weight and label smoothing, mean-reduced: PyTorch's
    composite, with the sum of the targets' weights taken as it takes it for tensor subclasses
    (gather at the masked target, the ignored ones zeroed), not by masked_select (a read of the
    device and a CPU fallback in the middle of the step). Any other call is PyTorch's own."""
    if weight is None or label_smoothing <= 0 or reduction != 1 or target.is_floating_point():
        return NotImplemented
    class_dim = 0 if x.dim() == 1 else 1
    logp = torch.log_softmax(x, class_dim, dtype=x.dtype)
    nll = torch.nn.functional.nll_loss(logp, target, weight, reduction="mean",
                                       ignore_index=ignore_index)
    ignored = target == ignore_index
    shape = [1] * logp.dim()
    shape[class_dim] = weight.shape[0]
    smooth = -(logp * weight.view(shape)).sum(class_dim).masked_fill(ignored, 0.0)
    kept = target.masked_fill(ignored, 0)
    weight_sum = weight.gather(0, kept.flatten()).masked_fill(ignored.flatten(), 0).sum()
    return (1 - label_smoothing) * nll + smooth.sum() / weight_sum * (label_smoothing / x.shape[class_dim])


_register("cross_entropy_loss", _cross_entropy)
_register("prod", _prod)
_register("prod.dim_int", _prod_dim)
_register("cumprod", _cumprod)
