"""Index tensors out of range: clamped reads and dropped writes by default (an XLA program cannot
raise); with lazyxla.set_index_checks(True), IndexError naming the op, as eager raises."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla

D = lazyxla.device()
X = torch.arange(5.0)
BAD, GOOD, NEGATIVE = torch.tensor([1, 7]), torch.tensor([1, 3]), torch.tensor([1, -2])

CASES = {
    "gather": lambda x, i: torch.gather(x, 0, i),
    "index_select": lambda x, i: x.index_select(0, i),
    "getitem": lambda x, i: x[i],
    "take": lambda x, i: torch.take(x, i),
    "embedding": lambda x, i: F.embedding(i.abs(), x.view(5, 1)).view(-1),
    "scatter": lambda x, i: x.clone().scatter_(0, i, torch.ones(2, device=x.device)),
    "index_put": lambda x, i: x.clone().index_put_((i,), torch.ones(2, device=x.device)),
    "index_add": lambda x, i: x.clone().index_add_(0, i, torch.ones(2, device=x.device)),
    "nll_loss": lambda x, i: F.nll_loss(x.view(1, 5).expand(2, 5), i.abs()),
}


@pytest.fixture
def checks():
    lazyxla.set_index_checks(True)
    try:
        yield
    finally:
        lazyxla.set_index_checks(False)


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_out_of_range_index_raises_index_error_naming_the_op(checks, fn):
    with pytest.raises((IndexError, RuntimeError)):
        fn(X, BAD)  # eager raises at the call
    pending = torch.ones(3, device=D) * 2
    with pytest.raises(IndexError, match=r"index out of range in aten\."):
        fn(X.to(D), BAD.to(D)).cpu()
    lazyxla.sync()
    torch.testing.assert_close(pending.cpu(), torch.full((3,), 2.0))  # other work is not lost


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_in_range_indices_match_eager_with_checks_on(checks, fn):
    torch.testing.assert_close(fn(X.to(D), GOOD.to(D)).cpu(), fn(X, GOOD))


@pytest.mark.parametrize("name", CASES.keys())
def test_negative_indices_are_out_of_range_exactly_where_eager_rejects_them(checks, name):
    fn = CASES[name]
    try:
        expected = fn(X, NEGATIVE)
    except (IndexError, RuntimeError):
        with pytest.raises(IndexError, match="index out of range"):
            fn(X.to(D), NEGATIVE.to(D)).cpu()
    else:
        torch.testing.assert_close(fn(X.to(D), NEGATIVE.to(D)).cpu(), expected)


def test_compiled_call_raises_on_out_of_range_and_runs_again_after(checks):
    f = torch.compile(lambda x, i: x[i] * 2, backend="lazyxla")
    torch.testing.assert_close(f(X.to(D), GOOD.to(D)).cpu(), X[GOOD] * 2)
    with pytest.raises(IndexError, match="aten.index.Tensor"):
        f(X.to(D), BAD.to(D))
    torch.testing.assert_close(f(X.to(D), GOOD.to(D)).cpu(), X[GOOD] * 2)


def test_by_default_reads_clamp_and_writes_drop():
    assert torch.gather(X.to(D), 0, BAD.to(D)).cpu().tolist() == [1.0, 4.0]
    out = X.to(D).index_put_((BAD.to(D),), torch.full((2,), -1.0, device=D))
    assert out.cpu().tolist() == [0.0, -1.0, 2.0, 3.0, 4.0]
