"""Gradients of products (prod, cumprod) without reading the device.

PyTorch's formulas look at the input's zeros on the host to pick a path: prod_backward counts
them (two reads, then `nonzero` on the CPU), cumprod_backward asks `(input == 0).any()` (a read
that synced every backward in lazy mode: NeRF's transmittance, stick-breaking weights). lazyxla's
autograd kernels for `prod` and `cumprod` compute every case with the same ops, zeros or not:

- prod: each element's gradient is the product of the elements before it times the product of
  those after it (two exclusive cumulative products), exact with zeros;
- cumprod, first order: before the first zero of a slice, eager's own `sum_{k>=j} g_k y_k / x_j`;
  at the first zero, the same sum with that zero taken as 1; after it, 0 (every product holds the
  first zero). Where the gradient must itself be differentiable (create_graph, or a traced
  backward), the exact O(n^2) form PyTorch uses there: for each j, the cumulative product with
  x_j taken as 1."""
from __future__ import annotations

import torch

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


_AUTOGRAD = torch.library.Library("aten", "IMPL")
_AUTOGRAD.impl("prod", _prod, "AutogradPrivateUse1")
_AUTOGRAD.impl("prod.dim_int", _prod_dim, "AutogradPrivateUse1")
_AUTOGRAD.impl("cumprod", _cumprod, "AutogradPrivateUse1")
