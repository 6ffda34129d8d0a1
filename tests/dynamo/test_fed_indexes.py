"""Int arguments that index a tensor in a compiled function (`x[i]`, `x[i:i + 3]`,
`cache[pos] = v`): fed to one program as the starts of their views, each call's view checked
against the traced one (lazyxla/dynamo/fed_starts.py)."""
import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.dynamo import fed_starts
from lazyxla.dynamo.bridge import Bridge

D = lazyxla.device()
X = torch.arange(40.0).reshape(10, 4) / 7


def _extractions():
    return metrics.counter_value("DynamoExtractCompiledGraph") or 0


def _run(fn, make_args, values, exact=True):
    """Compiles fn and calls it with make_args(v) for each of `values`, as eager with the same
    arguments on the CPU (bit for bit where `exact`); returns the extractions each call made."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    made = []
    for v in values:
        args = make_args(v)
        before = _extractions()
        got = compiled(*[a.to(D) if isinstance(a, torch.Tensor) else a for a in args])
        made.append(_extractions() - before)
        torch.testing.assert_close(got.cpu(), fn(*args), **({"rtol": 0, "atol": 0} if exact else {}))
    return made


def test_an_index_and_a_start_are_fed_on_every_call():
    """x[i] and x[i:i + 3] with a new i every call: after the bridge has traced the SymInt graph
    (the second value), no later index in range extracts again."""
    made = _run(lambda x, i: x[i] * 0.5 + x[i:i + 3].sum(0), lambda i: (X, i),
                [2, 3, 4, 7, 5, 6, 2])
    assert made[2:] == [0] * 5


def test_narrow_and_select_methods_are_fed():
    made = _run(lambda x, i: x.narrow(0, i, 2).sum(0) - x.select(0, i + 1), lambda i: (X, i),
                [2, 3, 6, 4, 8])
    assert made[2:] == [0] * 3


def test_a_slice_cut_short_at_the_end_gets_its_own_program():
    """x[i:i + 3] at i = 8 of 10 rows has 2 rows, which the fed program's 3 cannot give (Dynamo
    guards this and compiles the graph again; the bridge's own check is tested below): once
    extracted, neither kind of call extracts again."""
    made = _run(lambda x, i: x[i:i + 3].sum(0), lambda i: (X, i), [2, 3, 4, 8, 5, 8, 6])
    assert made[2] == 0 and made[3] >= 1 and made[4:] == [0, 0, 0]


def test_an_int_that_sets_a_slice_length_stays_keyed():
    """x[:n] reads n rows: the traces next to n make programs of other lengths, so n is keyed by
    value, each value extracted once."""
    made = _run(lambda x, n: x[:n].sum(0), lambda n: (X, n), [2, 3, 4, 3, 5])
    assert made[2] == 1 and made[3] == 0 and made[4] == 1


@pytest.mark.parametrize("grad", [False, True])
def test_stand_ins_past_the_end_clamp_alike_and_are_not_fed(grad):
    """x[i::2] at the usual stand-ins (a million and more) is empty for both, one program: the
    trace at the call's own i reads rows, another program, so i is not fed from them (it was:
    every later call summed no rows). With grad on, the graph is aot_autograd's (aten.slice)."""
    fn = lambda x, i: x[i::2].sum(0) * 2 + x[:, i % 3].sum()  # noqa: E731
    with torch.set_grad_enabled(grad):
        _run(fn, lambda i: (X, i), [2, 3, 5, 4, 9, 6, 7], exact=False)  # (sums: XLA's order)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("ks", [[0, -1, -1, 1, -2, 0, -1], [3, -1, 0, -1], [2, -2, -1, 0, -1]])
def test_a_start_that_python_clamps_is_checked_on_every_call(ks, grad):
    """x[k::2] of 2 rows reads row 1 at k = -1, row 0 at k = -2 and below. The stand-ins next to
    -1 that make one program, -2 and -3, both start at row 0, a constant of that program: the trace
    at -1 itself has the same structure but starts at 1, so it is another program; and a program
    traced at -2 (stand-ins -3 and -4, start 0 throughout) checks each later call's start (both
    were taken for one program fed k, and k = -1 read row 0)."""
    x = X[:2]
    with torch.set_grad_enabled(grad):
        _run(lambda x, k: x[k::2].sum(0) * 2, lambda k: (x, k), ks)


def _returned_slice(x, k):
    return x[:, :k], x.sum()


def _returned_slice_of_a_written_argument(x, k):
    x.unsqueeze_(0)
    x.mul_(2)
    return x[:, :k]


def _returned_slice_of_a_result(x, k):
    return (x * 2)[:, :k]


@pytest.mark.parametrize("fn", [_returned_slice, _returned_slice_of_a_written_argument,
                                _returned_slice_of_a_result])
@pytest.mark.parametrize("ks", [[2, 1, 3, 1, 2], [2, 5, 1, 7, 0], [6, 1, -3, -4]])
def test_a_returned_slice_that_stand_ins_clamp_alike_takes_each_calls_int(fn, ks):
    """x[:, :k] of 4 columns is all of x at stand-ins past the end, for both: the output was
    traced as x itself, and every later call (no_grad: Dynamo's own graph) returned all 4 columns.
    An output whose shape an int sets is now made from each call's int, or the int is keyed. At
    k = -3 Dynamo's graph has the output's shape fixed (no columns), the stand-ins not: the trace
    at the call's own k must make the same outputs as theirs."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    with torch.no_grad():
        for k in ks:
            x = X[:3].clone()
            got, want = compiled(x.to(D), k), fn(x, k)
            for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
                assert g.shape == w.shape and g.stride() == w.stride()
                torch.testing.assert_close(g.cpu(), w)


def test_stand_ins_next_to_an_int_stay_apart_and_in_int64():
    """Each try: two sets of stand-ins with the int moved by 1 or 2 from its value (other
    numbers keep their own stand-ins); a try past int64 is left out."""
    tries = fed_starts.near_stand_ins((5, 0.5), [0], ({1: 0.1}, {1: 0.2}))
    assert [(t[0][0], t[1][0]) for t in tries] == [(6, 4), (6, 7), (4, 3)]
    assert all(t[0][1] == 0.1 and t[1][1] == 0.2 for t in tries)
    top = fed_starts.near_stand_ins((2 ** 63 - 1,), [0], ({}, {}))
    assert [(t[0][0], t[1][0]) for t in top] == [(2 ** 63 - 2, 2 ** 63 - 3)]


def test_a_write_at_an_index_is_fed():
    """cache[pos] = v, a KV cache's write: the cache matches eager's after every call, one program
    for every position."""
    torch._dynamo.reset()

    def write(cache, v, pos):
        cache[pos] = v
        return cache.sum(0)
    compiled = torch.compile(write, backend="lazyxla")
    cache, lazy_cache = torch.zeros(10, 4), torch.zeros(10, 4).to(D)
    made = []
    for pos in [2, 3, 7, 4, 9, 5]:
        v = torch.full((4,), float(pos))
        before = _extractions()
        got = compiled(lazy_cache, v.to(D), pos)
        made.append(_extractions() - before)
        torch.testing.assert_close(got.cpu(), write(cache, v, pos), rtol=0, atol=0)
        torch.testing.assert_close(lazy_cache.cpu(), cache, rtol=0, atol=0)
    assert made[2:] == [0] * 4


def test_a_returned_view_at_an_index_is_fed_and_keeps_its_place():
    """A view at i returned as an output is made again at each call's i (outputs.VIEW_OF_INPUT):
    no extraction after the SymInt graph's, and every call's view has eager's values, strides and
    storage offset."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, i: (x[i], x[i:i + 2, 1:]), backend="lazyxla")
    x = X.to(D)
    for n, i in enumerate([2, 3, 5, 4, 0, 8]):
        before = _extractions()
        for got, want in zip(compiled(x, i), (X[i], X[i:i + 2, 1:])):
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
            assert got.storage_offset() == want.storage_offset() and got.stride() == want.stride()
        assert n < 2 or _extractions() == before


def test_a_gradient_through_an_index_matches_eager_and_is_fed():
    """A training step that reads a parameter at i: the forward saves the view at i for the
    backward (remade at each call's i), whose program feeds that view's start
    (dynamo/view_starts.py); every gradient is eager's, and no call extracts after the second."""
    torch._dynamo.reset()

    def step(w, i):
        loss = (w[i] * 2).sum() + w[i:i + 2].pow(2).sum()
        loss.backward()
        return loss
    compiled = torch.compile(step, backend="lazyxla")
    w = X.clone().requires_grad_()
    lazy_w = X.to(D).requires_grad_()
    for n, i in enumerate([2, 3, 6, 4, 0]):
        w.grad = lazy_w.grad = None
        before = _extractions()
        torch.testing.assert_close(compiled(lazy_w, i).cpu(), step(w, i))
        torch.testing.assert_close(lazy_w.grad.cpu(), w.grad)
        assert n < 2 or _extractions() == before


def test_every_call_checks_its_index_against_the_traced_view(symint_graph):
    """Called past Dynamo's guards, the bridge itself refuses what the fed program would read
    wrongly (XLA clamps a start out of range): a negative index or a shorter slice runs a program
    traced at its values, and an index out of range raises eager's error."""
    fn = lambda x, i: x[i] * 2 + x[i:i + 3].sum(0)  # noqa: E731
    x = X.to(D)
    bridge = Bridge(symint_graph(fn, x))
    for i in [3, 4, 5]:
        torch.testing.assert_close(bridge(x, i)[0].cpu(), fn(X, i), rtol=0, atol=0)
    assert _extractions() and len(bridge.programs) == 1
    for i in [-3, 8, 9, -3]:
        torch.testing.assert_close(bridge(x, i)[0].cpu(), fn(X, i), rtol=0, atol=0)
    assert len(bridge.programs) == 1 and len(bridge.outside) == 3
    with pytest.raises(IndexError, match="out of (bounds|range)"):
        bridge(x, 10)
    with pytest.raises(IndexError, match="out of (bounds|range)"):
        bridge(x, -11)
    torch.testing.assert_close(bridge(x, 6)[0].cpu(), fn(X, 6), rtol=0, atol=0)
