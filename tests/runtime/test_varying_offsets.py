"""Graphs that differ only in where they slice share one program: the starts that vary between
them become runtime scalars (ir/graph.py, lowering/views.py). Shapes here are unique to this file,
so that no other test's graphs have taught the cut these structures."""
import json

import pytest
import torch

import lazyxla
from lazyxla.ir import buffer as buf
from lazyxla.ir.graph import cut


def _compiles():
    return lazyxla.metrics.counter_value("UncachedCompile") or 0


def test_a_loop_over_batches_of_device_data_compiles_two_programs():
    torch.manual_seed(0)
    xc, wc = torch.randn(56, 11), torch.randn(11, 5)
    d = lazyxla.device()
    x, w = xc.to(d), wc.to(d)
    lazyxla.sync()
    before = _compiles()
    for i in range(0, 56, 7):
        got = (x[i:i + 7] @ w).relu().sum(0)
        lazyxla.sync()
        torch.testing.assert_close(got.cpu(), (xc[i:i + 7] @ wc).relu().sum(0))
    # the first batch's program, then one taking the start as a parameter for all the others
    assert _compiles() - before == 2
    with lazyxla.assert_no_recompile():  # the next epoch
        for i in range(0, 56, 7):
            got = (x[i:i + 7] @ w).relu().sum(0)
            lazyxla.sync()
            torch.testing.assert_close(got.cpu(), (xc[i:i + 7] @ wc).relu().sum(0))


@pytest.mark.parametrize("view", [
    lambda x, k: x[-k - 3:x.shape[0] - k],        # negative starts, as Python's
    lambda x, k: x[k:k + 5:3][:, 1:],             # a step, then a slice of the view
    lambda x, k: x.narrow(1, k, 2),
    lambda x, k: x[:, k],                         # select
    lambda x, k: x[k - 5],                        # a negative index
    lambda x, k: x.t()[1:3, k:k + 4],             # through a transpose
])
def test_reads_at_varying_starts_match_eager(view):
    torch.manual_seed(1)
    xc = torch.randn(9, 6)
    x = xc.to(lazyxla.device())
    lazyxla.sync()
    before = _compiles()
    for k in range(4):
        got = view(x, k) * 2
        lazyxla.sync()
        torch.testing.assert_close(got.cpu(), view(xc, k) * 2)
    assert _compiles() - before <= 2


def test_writes_at_varying_positions_share_one_program():
    """A ring buffer written at this step's slot, and writes through strided and narrowed views:
    the writes take their starts as parameters too."""
    d = lazyxla.device()
    ring_c, grid_c = torch.zeros(5, 3), torch.zeros(4, 13)
    ring, grid = ring_c.to(d), grid_c.to(d)
    lazyxla.sync()
    before = _compiles()
    for step in range(9):
        for r, g in ((ring, grid), (ring_c, grid_c)):
            r[step % 5] = torch.full((3,), float(step), device=r.device)
            g[:, step % 4:step % 4 + 7:3] += 1.0   # 3 elements at every start 0..3
            g.narrow(0, step % 3, 2).mul_(0.5)
        lazyxla.sync()
        torch.testing.assert_close(ring.cpu(), ring_c)
        torch.testing.assert_close(grid.cpu(), grid_c)
    assert _compiles() - before == 2


def test_gradients_of_varying_slices_share_one_program():
    """slice_backward and select_backward take their starts as parameters once they vary."""
    torch.manual_seed(2)
    wc = torch.randn(24, 6, requires_grad=True)
    xc = torch.randn(40, 6)
    d = lazyxla.device()
    w = wc.detach().to(d).requires_grad_()
    x = xc.to(d)
    opt, opt_c = torch.optim.SGD([w], lr=0.1), torch.optim.SGD([wc], lr=0.1)
    lazyxla.sync()
    before = _compiles()
    for step in range(6):
        for p, inp, o in ((w, x, opt), (wc, xc, opt_c)):
            i = 3 * step
            loss = (inp[i:i + 3] @ p[i:i + 3].T).square().mean() + p[step].sum() * 0.1
            loss.backward()
            o.step()
            o.zero_grad()
        lazyxla.sync()
        torch.testing.assert_close(w.detach().cpu(), wc.detach())
    assert _compiles() - before == 2


def test_functional_slice_and_select_scatter_at_varying_starts():
    d = lazyxla.device()
    base_c = torch.arange(30.0).reshape(5, 6)
    base = base_c.to(d)
    lazyxla.sync()
    before = _compiles()
    for k in range(5):
        got = torch.select_scatter(torch.slice_scatter(base, torch.ones(5, 2, device=d), 1, k, k + 2),
                                   torch.zeros(6, device=d), 0, k)
        want = torch.select_scatter(torch.slice_scatter(base_c, torch.ones(5, 2), 1, k, k + 2),
                                    torch.zeros(6), 0, k)
        lazyxla.sync()
        torch.testing.assert_close(got.cpu(), want)
    assert _compiles() - before == 2


def _spec(fn, x):
    out = fn(x)
    spec = cut([buf.state_of(out).root.node]).spec
    lazyxla.clear_pending_ir()
    return spec


def test_only_the_starts_that_vary_become_parameters():
    x = torch.randn(17, 3, device=lazyxla.device())
    lazyxla.sync()
    first = _spec(lambda x: x[2:5] + x[0:3], x)
    assert first.offset_ops == () and first.n_params == 1  # the first graph keeps its starts
    second = _spec(lambda x: x[2:5] + x[7:10], x)
    assert len(second.offset_ops) == 1 and second.n_params == 2  # x and the second slice's start
    third = _spec(lambda x: x[2:5] + x[11:14], x)
    assert third is second and third.hash != first.hash  # one spec, not rebuilt per start
    # another length is another program, whose first graph keeps its starts again
    assert _spec(lambda x: x[2:5] + x[7:9].sum(0), x).offset_ops == ()


def test_starts_that_repeat_from_step_to_step_stay_in_the_program():
    """An unrolled loop over time steps slices at many starts in one graph, the same every step:
    its program takes no starts as parameters."""
    torch.manual_seed(3)
    xc, wc = torch.randn(2, 7, 4), torch.randn(4, 4)
    d = lazyxla.device()
    x, w = xc.to(d), wc.to(d)
    lazyxla.sync()
    before = _compiles()
    for _ in range(3):
        h, hc = torch.zeros(2, 4, device=d), torch.zeros(2, 4)
        for t in range(7):
            h, hc = torch.tanh(x[:, t] + h @ w), torch.tanh(xc[:, t] + hc @ wc)
        spec = cut([buf.state_of(h).root.node]).spec
        lazyxla.sync()
        torch.testing.assert_close(h.cpu(), hc)
    assert spec.offset_ops == () and _compiles() - before == 1


def test_the_report_names_the_programs_fed_their_starts():
    x = torch.arange(26.0, device=lazyxla.device())
    lazyxla.sync()
    for k in range(3):
        (x[k:k + 13] * 3).sum().item()
    graphs = json.loads(lazyxla.report(as_json=True))["graphs"]
    assert [g["offsets"] for g in graphs[-2:]] == [0, 1]
    assert "(1 slice start fed)" in lazyxla.report()


def test_a_compiled_function_sliced_at_varying_starts_compiles_two_programs():
    """Dynamo passes the start as an int and the bridge extracts a graph per value; the XLA
    programs behind them are two."""
    torch.manual_seed(4)
    xc, wc = torch.randn(30, 9), torch.randn(9, 2)
    d = lazyxla.device()
    x, w = xc.to(d), wc.to(d)
    lazyxla.sync()

    @torch.compile(backend="lazyxla")
    def f(x, w, i):
        return (x[i:i + 5] @ w).relu().sum()

    before = _compiles()
    for i in range(0, 30, 5):
        torch.testing.assert_close(f(x, w, i).cpu(), (xc[i:i + 5] @ wc).relu().sum())
    assert _compiles() - before == 2


def test_a_compiled_function_fed_views_at_varying_starts_writes_through_them():
    """The view arguments' starts are traced into the program (the bridge re-extracts for each);
    after two starts, the programs for the others are those already compiled."""
    torch.manual_seed(5)
    xc, wc = torch.randn(33, 6), torch.randn(6, 3)
    d = lazyxla.device()
    x, w = xc.to(d), wc.to(d)
    lazyxla.sync()

    def f(xb, w):
        xb.mul_(2)
        return (xb @ w).sum(0), xb[1:3]
    cf = torch.compile(f, backend="lazyxla")

    for n, i in enumerate([0, 7, 14, 21, 28, 7]):
        if n == 2:
            before = _compiles()
        got, view = cf(x[i:i + 5], w)
        want, view_c = f(xc[i:i + 5], wc)
        torch.testing.assert_close(got.cpu(), want)
        view.add_(1)  # an output view of the argument's buffer: the write reaches x
        view_c.add_(1)
        torch.testing.assert_close(x.cpu(), xc)
    assert _compiles() == before


def test_varying_starts_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("LAZYXLA_VARYING_STARTS", "0")
    x = torch.randn(19, 3, device=lazyxla.device())
    lazyxla.sync()
    specs = [_spec(lambda x: x[k:k + 2] * 5, x) for k in range(3)]
    assert [s.offset_ops for s in specs] == [(), (), ()] and len({s.hash for s in specs}) == 3


def test_a_decode_loop_writing_a_static_kv_cache_compiles_a_few_programs_not_one_per_token():
    import torch.nn.functional as F
    torch.manual_seed(6)
    t, h, dh = 24, 2, 4
    ws = [torch.randn(h * dh, h * dh) * 0.3 for _ in range(3)]

    def decode(dev, tokens=12):
        wq, wk, wv = (w.to(dev) for w in ws)
        kc, vc = torch.zeros(1, h, t, dh, device=dev), torch.zeros(1, h, t, dh, device=dev)
        x, outs = torch.full((1, h * dh), 0.1, device=dev), []
        for pos in range(tokens):
            q, k, v = (x @ w for w in (wq, wk, wv))
            kc[:, :, pos] = k.view(1, h, dh)  # the cache written at this token's position
            vc[:, :, pos] = v.view(1, h, dh)
            mask = (torch.arange(t, device=dev) <= pos).view(1, t)
            att = F.scaled_dot_product_attention(q.view(1, h, 1, dh), kc, vc, attn_mask=mask)
            x = torch.tanh(att.reshape(1, h * dh) + x)
            if dev != "cpu":
                lazyxla.sync()
            outs.append(x.cpu())
        return torch.stack(outs)

    before = _compiles()
    got = decode(lazyxla.device())
    assert _compiles() - before <= 3  # (LAZYXLA_VARYING_STARTS=0: 12, one per token)
    torch.testing.assert_close(got, decode("cpu"))


def test_a_loop_over_every_index_keeps_a_bounded_shape_cache(monkeypatch):
    """Each new start is a new shape signature (`x[i]` keys its view by i): the per-signature
    caches keep two generations, so a loop over a long dataset does not grow them for good; what
    the loop records every step stays found, its results eager's, with eager's strides."""
    from lazyxla.generations import Generations
    from lazyxla.ir import meta
    limit = 16
    monkeypatch.setattr(meta, "_CACHE", Generations(limit))
    monkeypatch.setattr(meta, "_LAYOUTS", Generations(limit, missing=False))
    torch.manual_seed(5)
    xc, wc = torch.randn(300, 3), torch.randn(3, 2)
    d = lazyxla.device()
    x, w = xc.to(d), wc.to(d)
    acc, acc_c = torch.zeros(3, 2, device=d), torch.zeros(3, 2)
    for i in range(300):
        acc = acc + x[i][:, None] * w.t().t()  # a transposed view every step
        acc_c = acc_c + xc[i][:, None] * wc
        if i % 50 == 49:
            lazyxla.sync()
        for cache in (meta._CACHE, meta._LAYOUTS):
            assert len(cache) <= limit and len(cache.old) <= limit
    torch.testing.assert_close(acc.cpu(), acc_c)
    y = w.t() * 2  # a column-major result: its layout outlives many generations
    assert y.stride() == (wc.t() * 2).stride()
    for v, vc in ((w.t(), wc.t()), (x[7], xc[7]), (x[5:9].t(), xc[5:9].t())):  # views' too
        assert (v.stride(), v.storage_offset()) == (vc.stride(), vc.storage_offset())


def test_a_signature_in_use_keeps_its_id_across_generations(monkeypatch):
    """A signature the loop records again moves back to the current generation with its id, so
    the graph cut still finds the program by structure (a new id would rebuild its key)."""
    from lazyxla.generations import Generations
    from lazyxla.ir import meta
    monkeypatch.setattr(meta, "_CACHE", Generations(4))
    d = lazyxla.device()
    a, b = torch.randn(3, 7).to(d), torch.randn(3, 7).to(d)
    first = (a + b).untyped_storage()._lazyxla.node.key
    for i in range(40):  # signatures that come once, in between
        a.sum(0, keepdim=True).expand(40, 7)[i]
        assert (a + b).untyped_storage()._lazyxla.node.key == first
    lazyxla.sync()
