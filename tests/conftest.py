"""Shared test helpers: run the same function on CPU and on lazyxla and compare."""
from __future__ import annotations

import pytest
import torch

import lazyxla

DEV = lazyxla.device()


def to_dev(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to(DEV).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_dev(v) for v in x)
    if isinstance(x, dict):
        return {k: to_dev(v) for k, v in x.items()}
    return x


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    return x


def check(fn, *args, atol=None, rtol=None, equal_nan=True, **kwargs):
    """fn(*args) on CPU and fn(*args moved to lazyxla) agree: values, shapes, dtypes.
    Returns (expected, actual)."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_dev(args), **to_dev(kwargs))
    actual_cpu = to_cpu(actual)
    torch.testing.assert_close(actual_cpu, to_cpu(expected), atol=atol, rtol=rtol,
                               equal_nan=equal_nan)
    return expected, actual


@pytest.fixture
def dev():
    return DEV


@pytest.fixture
def fresh_metrics():
    lazyxla.metrics.clear_all()
    yield lazyxla.metrics
