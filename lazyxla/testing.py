"""Differential testing helpers: run the same function on CPU and on lazyxla and compare."""
from __future__ import annotations

import torch

import lazyxla
from lazyxla import metrics


def to_dev(x):
    """Move a tree of tensors to lazyxla, keeping requires_grad."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(lazyxla.device()).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_dev(v) for v in x)
    if isinstance(x, dict):
        return {k: to_dev(v) for k, v in x.items()}
    return x


def sample(shape, dtype, generator) -> torch.Tensor:
    """Values of `dtype` for a differential test: normals times 3 (floats, complex), integers in
    [-5, 9) ([0, 9) for uint8), bools half true."""
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex128 if dtype.is_complex else torch.float64
        return (torch.randn(shape, generator=generator, dtype=wide) * 3).to(dtype)
    return torch.randint(0 if dtype is torch.uint8 else -5, 9, shape, generator=generator).to(dtype)


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def check(fn, *args, atol=None, rtol=None, equal_nan=True, allow_fallback=False, **kwargs):
    """Assert fn(*args) gives the same values, shapes and dtypes on CPU and on lazyxla.
    Unless allow_fallback, also assert that no op ran through the CPU fallback.
    Returns (expected, actual_on_cpu)."""
    expected = fn(*args, **kwargs)
    before = metrics.executed_fallback_ops()
    actual = to_cpu(fn(*to_dev(args), **to_dev(kwargs)))
    torch.testing.assert_close(actual, to_cpu(expected), atol=atol, rtol=rtol, equal_nan=equal_nan)
    if not allow_fallback:
        new = sorted(set(metrics.executed_fallback_ops()) - set(before))
        assert not new, f"ops fell back to the CPU: {new}"
    return expected, actual


def check_grad(fn, *args, atol=None, rtol=None, **kwargs):
    """Gradients of fn(*args).sum() w.r.t. every floating input agree on CPU and lazyxla."""
    def grads(inputs):
        inputs = [x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor)
                  else x for x in inputs]
        out = fn(*inputs, **kwargs)
        out = out[0] if isinstance(out, (tuple, list)) else out
        out.float().sum().backward() if out.dtype != torch.float32 else out.sum().backward()
        return [x.grad for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    expected = grads(list(args))
    actual = to_cpu(grads(list(to_dev(args))))
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    return expected, actual
