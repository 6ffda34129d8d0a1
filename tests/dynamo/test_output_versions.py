"""Outputs of one compiled graph that alias each other are related as eager relates them.

Where a function returns a result and views of it (`y, y[1:]`), or several views of a result it
does not return (`y[1:], y[:2]`), eager's later outputs are views of that result: one storage,
one version counter, `_base` the result. A write through any of them then moves the counter that
autograd checks for a saved result, and a backward that needs the old value raises instead of
computing a wrong gradient.
"""
import contextlib

import pytest
import torch

import lazyxla

D = lazyxla.device()


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield


def _result_and_slice(x):
    y = x * 2
    return y, y[1:]


def _result_and_reshaped(x):
    y = x * 2
    return y, y.view(3, 1)


def _two_slices_of_an_unreturned_result(x):
    y = x * 2
    return y[1:], y[:2]


def _result_its_slice_and_a_slice_of_that(x):
    y = x * 2
    v = y[1:]
    return y, v, v[1:]


def _result_its_detach_and_a_detached_slice(x):
    y = x * 2
    return y, y.detach(), y[1:].detach()


def _result_and_its_bits_as_int(x):
    y = x * 2
    return y, y.view(torch.int32)


def _complex_result_and_its_conjugates(x):
    y = torch.complex(x, x) * 2
    return y, y.conj(), y[1:].conj()


def _a_transposed_result_and_a_row(x):
    y = x.reshape(3, 1).expand(3, 2) * 2
    return y.t(), y[0]


ALIASING = [_result_and_slice, _result_and_reshaped, _two_slices_of_an_unreturned_result,
            _result_its_slice_and_a_slice_of_that, _result_its_detach_and_a_detached_slice,
            _result_and_its_bits_as_int, _complex_result_and_its_conjugates,
            _a_transposed_result_and_a_row]

MODES = {"grad enabled": contextlib.nullcontext, "no_grad": torch.no_grad}


def _relations(outs):
    """What eager's aliasing of `outs` is: per output its geometry, whether it is a view and of
    which output (or of the same base as which others), and which outputs' versions move when
    each one's does."""
    looks = []
    for o in outs:
        of = next((j for j, p in enumerate(outs) if o._base is p), None)
        siblings = tuple(j for j, p in enumerate(outs) if p is not o and o._base is not None
                         and p._base is o._base)
        looks.append((tuple(o.shape), o.dtype, tuple(o.stride()), o.storage_offset(),
                      o.is_conj(), o._is_view(), of, siblings))
    moved = []
    for o in outs:
        before = [p._version for p in outs]
        torch._C._increment_version([o])
        moved.append(tuple(j for j, p in enumerate(outs) if p._version != before[j]))
    return looks, moved


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", ALIASING, ids=lambda f: f.__name__.strip("_"))
def test_outputs_that_alias_each_other_are_views_and_detaches_as_in_eager(fn, mode):
    x = torch.ones(3)
    cf = torch.compile(fn, backend="lazyxla")
    with MODES[mode]():
        expected = fn(x)
        for _ in range(2):  # the extracting call, then a replay
            got = cf(x.to(D))
            assert _relations(got) == _relations(expected)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g.resolve_conj().cpu(), e.resolve_conj())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_result_and_slice, _result_and_reshaped],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_write_through_a_returned_view_invalidates_the_saved_result(fn, mode):
    """The brief's case: y saved for w's gradient, then written through its view: eager raises
    in the backward; without a shared version counter the gradient read the written y."""
    cf = torch.compile(fn, backend="lazyxla")
    with MODES[mode]():
        y, v = cf(torch.ones(3, device=D))
    assert v._is_view() and v._base is y and not y._is_view()
    w = torch.ones(3, device=D, requires_grad=True)
    z = (w * y).sum()  # saves y
    with MODES[mode]():
        v.add_(10)
    assert (y._version, v._version) == (1, 1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_writes_through_a_returned_view_and_its_base_are_seen_by_both():
    cf = torch.compile(_result_and_slice, backend="lazyxla")
    with torch.no_grad():
        y, v = cf(torch.ones(3, device=D))
        v.add_(10)
        torch.testing.assert_close(y.cpu(), torch.tensor([2.0, 12.0, 12.0]))
        y.mul_(2)
        torch.testing.assert_close(v.cpu(), torch.tensor([24.0, 24.0]))
    assert y._version == v._version == 2


def test_each_call_returns_views_of_its_own_new_result():
    cf = torch.compile(_two_slices_of_an_unreturned_result, backend="lazyxla")
    with torch.no_grad():
        a1, b1 = cf(torch.ones(3, device=D))
        a2, b2 = cf(torch.ones(3, device=D))
        a2.add_(1)
    assert a1._base is b1._base and a2._base is b2._base and a1._base is not a2._base
    assert (a1._version, b1._version, a2._version, b2._version) == (0, 0, 1, 1)
    torch.testing.assert_close(b1.cpu(), torch.tensor([2.0, 2.0]))
    torch.testing.assert_close(b2.cpu(), torch.tensor([2.0, 3.0]))

