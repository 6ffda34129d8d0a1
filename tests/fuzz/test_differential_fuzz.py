"""Differential fuzzing: random chains of ops, with views and in-place updates, on lazyxla and on
CPU must agree (values, dtypes, shapes), and must not fall back to the CPU."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyxla
from lazyxla.testing import check

UNARY = [torch.neg, torch.abs, torch.tanh, torch.sigmoid, torch.exp, lambda x: x * 0.5,
         lambda x: x.clamp(-1, 1), torch.relu, lambda x: x.sum(-1, keepdim=True),
         lambda x: x.amax(0, keepdim=True), lambda x: x.softmax(-1), lambda x: x.t().contiguous().t()]
BINARY = [torch.add, torch.sub, torch.mul, torch.maximum, torch.minimum,
          lambda a, b: torch.where(a > b, a, b), lambda a, b: a * 2 - b / 3]


@st.composite
def programs(draw):
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(1, 4))
    steps = draw(st.lists(st.tuples(st.integers(0, len(UNARY) - 1), st.integers(0, len(BINARY) - 1),
                                    st.booleans(), st.booleans()), min_size=1, max_size=5))
    return rows, cols, steps


def _run(x, y, steps):
    a, b = x.clone(), y.clone()
    for u, bi, inplace, through_view in steps:
        a = UNARY[u](a)
        if a.shape != b.shape:
            a = a.expand_as(b) if a.dim() == b.dim() else a
        if inplace and a.shape == b.shape:
            target = b[0] if through_view and b.shape[0] > 0 else b
            target.add_(BINARY[bi](a, b)[0] if target.dim() < b.dim() else BINARY[bi](a, b))
        else:
            a = BINARY[bi](a, b)
    return a, b


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**31 - 1))
def test_random_op_chains_match_eager(program, seed):
    rows, cols, steps = program
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(rows, cols, generator=g), torch.randn(rows, cols, generator=g)
    check(lambda x, y: _run(x, y, steps), x, y, rtol=1e-4, atol=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([torch.int64, torch.int32, torch.float32, torch.bool]),
       st.sampled_from([torch.int64, torch.float32, torch.float64]),
       st.sampled_from([2, 2.5, True, -3]))
def test_type_promotion_matches_eager(dt_a, dt_b, scalar):
    a = (torch.arange(6).reshape(2, 3) - 2).to(dt_a)
    b = torch.arange(3).to(dt_b)
    check(lambda a, b: (a + b, a * scalar, b + scalar, a > b, torch.where(a > 0, a, b)), a, b)


# Views, layouts and in-place writes: a pool of tensors (views of views, results of ops on
# views), written in place through any of them; every member must agree with eager in values and
# (on dims longer than 1) strides, which decide whether reshape/contiguous alias or copy.
VIEW_OPS = [lambda t: t.transpose(0, -1), lambda t: t[..., ::2], lambda t: t[1:],
            lambda t: t.unsqueeze(0), lambda t: t.contiguous(), lambda t: t.reshape(-1),
            lambda t: t.flatten(), lambda t: t.movedim(0, -1), lambda t: t.t() if t.dim() == 2 else t,
            lambda t: t * 2, lambda t: t.clone(), lambda t: t.sum(0)]
WRITES = [lambda t: t.add_(1.5), lambda t: t.mul_(-2), lambda t: t.zero_(),
          lambda t: t.clamp_(-0.5, 0.5), lambda t: t.masked_fill_(t > 0, 7.0),
          lambda t: t.__setitem__((Ellipsis, 0), 4.0)]


@st.composite
def view_programs(draw):
    shape = draw(st.lists(st.integers(2, 4), min_size=2, max_size=3))
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 99), st.integers(0, 99)),
                          min_size=2, max_size=12))
    return shape, steps


def _run_views(x, steps):
    pool = [x.clone()]
    for is_write, i, k in steps:
        t = pool[i % len(pool)]
        if t.dim() == 0 or t.numel() == 0:
            continue
        if is_write:
            WRITES[k % len(WRITES)](t)
        else:
            pool.append(VIEW_OPS[k % len(VIEW_OPS)](t))
    return pool


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(view_programs(), st.integers(0, 2**31 - 1))
def test_views_layouts_and_writes_match_eager(program, seed):
    shape, steps = program
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    expected = _run_views(x, steps)
    got = _run_views(x.to(lazyxla.device()), steps)
    for e, g in zip(expected, got):
        long = [d for d in range(e.dim()) if e.shape[d] > 1]
        assert [g.stride(d) for d in long] == [e.stride(d) for d in long]
        torch.testing.assert_close(g.cpu(), e)
