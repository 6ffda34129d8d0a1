"""Int arguments of a compiled function (Dynamo passes an int that changed between calls as a
SymInt): fed to the program on every call where they are runtime scalars, keyed by value where
they shape the program (lazyxla/dynamo/input_items.py)."""
import logging

import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()


def _extractions():
    return metrics.counter_value("DynamoExtractCompiledGraph") or 0


def _run(fn, x, calls):
    """Compiles fn, calls it on x and each tuple of `calls` as eager does; returns the extractions
    each call made."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    made = []
    for extra in calls:
        before = _extractions()
        got = compiled(x.to(D), *extra)
        made.append(_extractions() - before)
        want = fn(x, *extra)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    return made


X = torch.tensor([0.5, -2.0, 3.0])


def test_an_int_used_as_a_scalar_is_fed_on_every_call():
    """x * n + n: the second value makes n a SymInt (Dynamo recompiles once, the bridge traces
    twice with stand-ins); no later value extracts again, negative and 2**40 included."""
    made = _run(lambda x, n: x * n + n, X, [(2,), (3,), (4,), (-7,), (2 ** 40,), (5,)])
    assert made[2:] == [0, 0, 0, 0]


def test_int_arithmetic_between_ops_is_computed_on_every_call():
    """(n + 1) * 0.5 is Python arithmetic on the SymInt: computed per call, its result fed."""
    made = _run(lambda x, n: x * n - (n + 1) * 0.5, X, [(2,), (3,), (6,), (-5,), (9,)])
    assert made[2:] == [0, 0, 0]


def test_an_int_that_sets_a_shape_is_keyed_by_value():
    """arange(n): each new n is another program; a value seen before is not traced again."""
    fn = lambda x, n: torch.arange(n, device=x.device) * x.sum()  # noqa: E731
    made = _run(fn, X, [(2,), (3,), (4,), (3,), (5,)])
    assert made[2] == 1 and made[3] == 0 and made[4] == 1


def test_one_int_fed_and_one_keyed_in_the_same_graph():
    """n scales x (fed), m is a length (keyed): new values of n extract nothing."""
    def fn(x, n, m):
        return (x * n).sum() + torch.arange(m, device=x.device)
    made = _run(fn, X, [(2, 2), (3, 3), (4, 3), (5, 3), (6, 4), (7, 4)])
    assert made[3] == 0 and made[5] == 0 and made[4] >= 1


def test_an_int_and_a_float_argument_are_both_fed():
    """A Python float (a 0-dim CPU tensor read with .item() in the graph) beside an int."""
    fn = lambda x, lr, n: x * lr + n  # noqa: E731
    made = _run(fn, X, [(0.5, 2), (0.25, 3), (0.125, 4), (0.3, 5), (-2.0, 6)])
    assert made[2:] == [0, 0, 0]


def test_a_value_check_runs_on_every_fed_value():
    """clamp's bound must fit the tensor's dtype: eager raises for 2**31 on int32. The fed program
    checks each call's value, raises eager's error, and goes on feeding afterwards."""
    fn = lambda x, n: x.clamp(max=n) * 2  # noqa: E731
    x = torch.tensor([1, 50, -120], dtype=torch.int32)
    assert _run(fn, x, [(5,), (6,), (7,)])[2] == 0
    compiled = torch.compile(fn, backend="lazyxla")
    with pytest.raises(RuntimeError, match="without overflow"):
        fn(x, 2 ** 31)
    before = _extractions()
    with pytest.raises(RuntimeError, match="without overflow"):
        compiled(x.to(D), 2 ** 31).cpu()
    torch.testing.assert_close(compiled(x.to(D), 9).cpu(), fn(x, 9))
    assert _extractions() == before


def test_an_int_a_dtype_check_refuses_far_from_its_value_is_fed_and_checked():
    """An int8 tensor cannot hold the usual stand-ins (the trace raises eager's overflow error):
    stand-ins next to n's value are traced instead, so n is fed, and a value out of range still
    raises eager's error."""
    fn = lambda x, n: x.clamp(max=n) * 2  # noqa: E731
    x = torch.tensor([1, 50, -120], dtype=torch.int8)
    made = _run(fn, x, [(5,), (6,), (7,), (6,), (-100,)])
    assert made[2:] == [0, 0, 0]
    compiled = torch.compile(fn, backend="lazyxla")
    with pytest.raises(RuntimeError, match="without overflow"):
        compiled(x.to(D), 300).cpu()
    torch.testing.assert_close(compiled(x.to(D), 9).cpu(), fn(x, 9))


def test_feeding_off_keys_ints_by_value(monkeypatch):
    monkeypatch.setenv("LAZYXLA_FEED_ITEM_INPUTS", "0")
    made = _run(lambda x, n: x * n, X, [(2,), (3,), (4,), (3,)])
    assert made[2:] == [1, 0]


def test_a_fed_int_is_not_logged_as_a_retrace(caplog):
    with caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        _run(lambda x, n: x - n, X, [(2,), (3,), (4,), (5,)])
    assert "re-extracting" not in caplog.text


def test_a_float_stays_fed_beside_an_int_that_sets_a_shape():
    """lr scales x (fed), m is a length (keyed): new learning rates extract nothing."""
    def fn(x, lr, m):
        return (x * lr).sum() + torch.arange(m, device=x.device)
    made = _run(fn, X, [(0.5, 2), (0.25, 3), (0.125, 3), (0.3, 3), (0.7, 4), (0.9, 4)])
    assert made[3] == 0 and made[5] == 0 and made[4] >= 1


def test_a_fed_int_reaches_the_backward_program():
    """Training: the backward graph takes n too (d(w * x * n)/dw = x * n); both programs are fed."""
    torch._dynamo.reset()
    fn = lambda w, x, n: (w * x * n).sum()  # noqa: E731
    compiled = torch.compile(fn, backend="lazyxla")
    w = torch.tensor([1.0, 2.0, -1.0])
    wd = w.to(D).requires_grad_()
    counts = []
    for n in (2, 3, 4, 5, -6):
        before = _extractions()
        wd.grad = None
        compiled(wd, X.to(D), n).backward()
        counts.append(_extractions() - before)
        torch.testing.assert_close(wd.grad.cpu(), X * n)
    assert counts[2:] == [0, 0, 0]
