"""Index tensors out of range, integer division by zero, and values eager rejects: distribution
parameters (bernoulli's p outside [0, 1], multinomial's negative, infinite or all-zero
probabilities, normal's negative std), binary_cross_entropy inputs outside [0, 1]. An XLA program
cannot raise: it clamps such reads, drops such writes, gives -1 for such quotients and computes
with such values regardless. By default ("deferred") the next read, sync or wait raises eager's
error naming the op; with set_index_checks("strict") the sync, read or compiled call that runs
the program raises, keeping none of its results; with "off" nothing is reported."""
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
    "multi_margin_loss": lambda x, i: F.multi_margin_loss(x.view(1, 5).expand(2, 5), i),
    "embedding_bag": lambda x, i: F.embedding_bag(i, x.view(5, 1),
                                                  torch.tensor([0], device=x.device)).view(-1),
    "scatter_add": lambda x, i: x.clone().scatter_add_(0, i, torch.ones(2, device=x.device)),
    "scatter_reduce": lambda x, i: x.clone().scatter_reduce_(0, i, torch.ones(2, device=x.device),
                                                             "amax"),
    "one_hot": lambda x, i: F.one_hot(i, 5).to(x.dtype),
    # an index is within its own plane (batch, channel): 0 <= i < 4 here
    "max_unpool": lambda x, i: F.max_unpool1d(x[:2].view(1, 1, 2), i.view(1, 1, 2), 2).view(-1),
}


def eager_error(fn, *args):
    """The exception type eager raises for this call (it must raise)."""
    try:
        fn(*args)
    except (IndexError, RuntimeError) as e:
        return type(e)
    raise AssertionError("eager accepted the call")


def _mode(mode):
    before = lazyxla.index_checks()
    lazyxla.set_index_checks(mode)
    try:
        yield
    finally:
        lazyxla.set_index_checks(before)


@pytest.fixture
def checks():
    yield from _mode("strict")


@pytest.fixture
def unchecked():
    yield from _mode("off")


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_out_of_range_index_raises_eagers_error_type_naming_the_op(checks, fn):
    error = eager_error(fn, X, BAD)  # eager raises at the call: IndexError or RuntimeError
    pending = torch.ones(3, device=D) * 2
    with pytest.raises(error, match=r"in (aten\.|lazyxla::)") as raised:
        fn(X.to(D), BAD.to(D)).cpu()
    assert type(raised.value) is error
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
    except (IndexError, RuntimeError) as e:
        with pytest.raises(type(e), match="out of (range|bounds)|invalid max index|not in the valid range"):
            fn(X.to(D), NEGATIVE.to(D)).cpu()
    else:
        torch.testing.assert_close(fn(X.to(D), NEGATIVE.to(D)).cpu(), expected)


def test_compiled_call_raises_on_out_of_range_and_runs_again_after(checks):
    f = torch.compile(lambda x, i: x[i] * 2, backend="lazyxla")
    torch.testing.assert_close(f(X.to(D), GOOD.to(D)).cpu(), X[GOOD] * 2)
    with pytest.raises(IndexError, match="aten.index.Tensor"):
        f(X.to(D), BAD.to(D))
    torch.testing.assert_close(f(X.to(D), GOOD.to(D)).cpu(), X[GOOD] * 2)


def test_with_checks_off_reads_clamp_and_writes_drop(unchecked):
    assert torch.gather(X.to(D), 0, BAD.to(D)).cpu().tolist() == [1.0, 4.0]
    out = X.to(D).index_put_((BAD.to(D),), torch.full((2,), -1.0, device=D))
    assert out.cpu().tolist() == [0.0, -1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------- deferred (the default)

def test_checks_are_deferred_by_default():
    assert lazyxla.index_checks() == "deferred"


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_deferred_the_read_after_the_program_raises_naming_the_op(fn):
    pending = torch.ones(3, device=D) * 2
    with pytest.raises(eager_error(fn, X, BAD),
                       match=r"in (aten\.|lazyxla::).*results were kept"):
        fn(X.to(D), BAD.to(D)).cpu()
    torch.testing.assert_close(pending.cpu(), torch.full((3,), 2.0))  # reported once, then clear
    torch.testing.assert_close(fn(X.to(D), GOOD.to(D)).cpu(), fn(X, GOOD))


def test_deferred_sync_and_wait_report_what_ran_unread():
    x, bad = X.to(D), BAD.to(D)
    out = x[bad] * 2
    with pytest.raises(IndexError, match="aten.index.Tensor"):
        lazyxla.sync(wait=True)
    assert out.cpu().tolist() == [2.0, 8.0]  # kept, clamped: the error was the report
    keep = torch.gather(x, 0, bad)
    with pytest.raises(RuntimeError, match="index out of bounds in aten.gather"):
        lazyxla.sync()  # reports it if its program has finished by then,
        lazyxla.wait()  # else this does
    lazyxla.wait()  # reported once
    del keep


def test_deferred_compiled_call_reports_at_the_next_read_and_runs_again():
    f = torch.compile(lambda x, i: x[i] * 2, backend="lazyxla")
    x = X.to(D)
    result = f(x, BAD.to(D))  # dispatched; nothing waits for its flags
    with pytest.raises(IndexError, match="aten.index.Tensor"):
        result.cpu()
    torch.testing.assert_close(f(x, GOOD.to(D)).cpu(), X[GOOD] * 2)


def test_deferred_flags_of_a_loop_that_never_reads_stay_bounded():
    import jax.numpy as jnp
    from lazyxla.runtime import executor
    f = torch.compile(lambda x, i: x[i] * 2, backend="lazyxla")
    x, good = X.to(D), GOOD.to(D)
    f(x, good)
    lazyxla.wait()
    clean = ((("probe", "index"),), jnp.zeros((1,), bool))
    flagged = ((("flagged", "index"),), jnp.ones((1,), bool))
    executor._unreported[:] = [flagged] + [clean] * executor._INFLIGHT_PRUNE
    f(x, good)  # a compiled call reads nothing: finished clean flags are dropped, flagged kept
    assert executor._unreported[0][0] == (("flagged", "index"),) and len(executor._unreported) <= 2
    with pytest.raises(IndexError, match="flagged"):
        lazyxla.wait()


def test_a_bad_mode_is_rejected_naming_the_modes():
    with pytest.raises(ValueError, match="off.*deferred.*strict"):
        lazyxla.set_index_checks("sometimes")
    assert lazyxla.index_checks() == "deferred"


# ---------------------------------------------------------------- integer division by zero

A, Z = torch.tensor([5, -3]), torch.tensor([0, 2])
DIVISIONS = {
    "floor_divide": lambda a, z: a // z,
    "remainder": lambda a, z: a % z,
    "fmod": lambda a, z: torch.fmod(a, z),
    "div_trunc": lambda a, z: torch.div(a, z, rounding_mode="trunc"),
    "div_floor": lambda a, z: torch.div(a, z, rounding_mode="floor"),
    "by_scalar_zero": lambda a, z: a // 0,  # the scalar is a runtime value of the program
}


@pytest.mark.parametrize("fn", DIVISIONS.values(), ids=DIVISIONS.keys())
def test_integer_division_by_zero_raises_eagers_error_at_the_next_read(fn):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(A, Z)
    with pytest.raises(RuntimeError, match="ZeroDivisionError: integer division by zero in aten"):
        fn(A.to(D), Z.to(D)).cpu()
    ones = torch.tensor([1, 2])  # divisors not zero: as eager
    if fn is DIVISIONS["by_scalar_zero"]:
        torch.testing.assert_close((A.to(D) // 2).cpu(), A // 2)
    else:
        torch.testing.assert_close(fn(A.to(D), ones.to(D)).cpu(), fn(A, ones))


@pytest.mark.parametrize("fn", DIVISIONS.values(), ids=DIVISIONS.keys())
def test_integer_division_by_zero_raises_when_its_program_runs_if_strict(checks, fn):
    pending = torch.ones(2, device=D) * 3
    with pytest.raises(RuntimeError, match="ZeroDivisionError.*no result of it was kept"):
        fn(A.to(D), Z.to(D)).cpu()
    torch.testing.assert_close(pending.cpu(), torch.full((2,), 3.0))


def test_integer_division_by_zero_unchecked_gives_xlas_values(unchecked):
    assert (A.to(D) // Z.to(D)).cpu().tolist() == [-1, -2]
    assert (A.to(D) % Z.to(D)).cpu().tolist() == [5, 1]


def test_float_division_by_zero_is_never_flagged():
    a, z = A.float().to(D), Z.float().to(D)
    for fn in DIVISIONS.values():
        fn(a, z).cpu()
    torch.testing.assert_close((a // z).cpu(), A.float() // Z.float())
    torch.testing.assert_close(torch.remainder(a, 0).cpu(), torch.remainder(A.float(), 0), equal_nan=True)


# ---------------------------------------------------------------- invalid distributions

P = torch.tensor([[0.5, 1.5], [0.2, 0.3]])
SAMPLERS = {  # (sampler, a parameter eager rejects, one it accepts, eager's message)
    "bernoulli": (torch.bernoulli, P, P.clamp(max=1), r"p_in >= 0 && p_in <= 1"),
    "bernoulli_nan": (torch.bernoulli, torch.tensor([float("nan"), 0.5]), torch.tensor([0.0, 1.0]),
                      r"p_in >= 0 && p_in <= 1"),
    "bernoulli_p_tensor": (lambda p: torch.zeros_like(p).bernoulli_(p), -P, P / 2,
                           r"p_in >= 0 && p_in <= 1"),
    "multinomial_negative": (lambda p: torch.multinomial(p, 1), P - 0.4, P, r"element < 0"),
    "multinomial_inf": (lambda p: torch.multinomial(p, 1), P / 0, P,
                        r"`inf`, `nan` or element < 0"),
    "multinomial_zero_row": (lambda p: torch.multinomial(p, 1, True),
                             P * torch.tensor([[1.0], [0.0]]), P, r"sum of probabilities <= 0"),
    "normal_std": (lambda s: torch.normal(torch.zeros_like(s), s), P - 1, P,
                   r"normal expects all elements of std >= 0.0"),
    "normal_float_mean": (lambda s: torch.normal(0.0, s), P - 1, P,
                          r"normal expects all elements of std >= 0.0"),
}


@pytest.mark.parametrize("case", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_invalid_distribution_raises_eagers_error_at_the_next_read(case):
    sample, bad, good, message = case
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
        sample(bad)  # eager raises at the call
    with pytest.raises(RuntimeError, match=message + r".*in aten\..*results were kept"):
        sample(bad.to(D)).cpu()
    out = sample(good.to(D))  # a valid parameter: sampled as eager, nothing reported
    assert out.shape == sample(good).shape and out.dtype == sample(good).dtype
    out.cpu()


@pytest.mark.parametrize("case", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_invalid_distribution_raises_when_its_program_runs_if_strict(checks, case):
    sample, bad, _, message = case
    pending = torch.ones(2, device=D) * 3
    with pytest.raises(RuntimeError, match=message + r".*no result of it was kept"):
        sample(bad.to(D)).cpu()
    torch.testing.assert_close(pending.cpu(), torch.full((2,), 3.0))


def test_invalid_distribution_unchecked_samples_regardless(unchecked):
    assert torch.bernoulli(P.to(D)).cpu()[0, 1] == 1.0  # p > 1: always drawn
    torch.multinomial((P - 0.4).to(D), 1).cpu()


def test_invalid_distribution_under_torch_compile_is_reported():
    f = torch.compile(lambda p: torch.bernoulli(p) * 2, backend="lazyxla")
    f(P.clamp(max=1).to(D)).cpu()
    with pytest.raises(RuntimeError, match=r"p_in >= 0 && p_in <= 1"):
        f(P.to(D)).cpu()


def test_searchsorted_sorter_out_of_range_raises(checks):
    seq, values = torch.tensor([3.0, 1.0, 2.0]), torch.tensor([1.5])
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        torch.searchsorted(seq, values, sorter=torch.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="sorter index out of range .in aten.searchsorted"):
        torch.searchsorted(seq.to(D), values.to(D), sorter=torch.tensor([1, 2, 3], device=D)).cpu()
    good = torch.tensor([1, 2, 0])
    torch.testing.assert_close(torch.searchsorted(seq.to(D), values.to(D), sorter=good.to(D)).cpu(),
                               torch.searchsorted(seq, values, sorter=good))


@pytest.mark.parametrize("offsets,last", [([1, 2], False), ([0, 5], False), ([0, 2, 5], True)],
                         ids=["first_not_0", "past_the_end", "last_past_the_end"])
def test_embedding_bag_offsets_eager_rejects_raise(checks, offsets, last):
    idx, w = torch.tensor([0, 1, 2, 3]), torch.ones(5, 2)
    with pytest.raises(RuntimeError, match=r"offsets\[(0|-1)\]"):
        F.embedding_bag(idx, w, torch.tensor(offsets), include_last_offset=last)
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0.*in aten._embedding_bag"):
        F.embedding_bag(idx.to(D), w.to(D), torch.tensor(offsets, device=D),
                        include_last_offset=last).cpu()


@pytest.mark.parametrize("x", [[0.5, 1.5], [-0.1, 0.5], [float("nan"), 0.5]],
                         ids=["above_1", "below_0", "nan"])
def test_binary_cross_entropy_input_outside_0_1_raises_eagers_error(x):
    x, y = torch.tensor(x), torch.tensor([1.0, 0.0])
    message = "all elements of input should be between 0 and 1"
    with pytest.raises(RuntimeError, match=message):
        F.binary_cross_entropy(x, y)
    with pytest.raises(RuntimeError, match=message + ".*in aten.binary_cross_entropy"):
        F.binary_cross_entropy(x.to(D), y.to(D)).cpu()
    ok = torch.tensor([0.0, 1.0])  # the bounds themselves are valid (the log is clamped at -100)
    torch.testing.assert_close(F.binary_cross_entropy(ok.to(D), y.to(D)).cpu(),
                               F.binary_cross_entropy(ok, y))


ONES = torch.ones(3)
CTC_LOG_PROBS = torch.randn(6, 2, 4, generator=torch.Generator().manual_seed(0)).log_softmax(2)
REJECTED = {  # (op, a value eager rejects, one it accepts, lazyxla's error and message)
    "masked_scatter_short_source": (
        lambda m: torch.zeros(3, device=m.device).masked_scatter_(m, ONES[:2].to(m.device)),
        torch.tensor([True, True, True]), torch.tensor([True, False, True]),
        RuntimeError, "Number of elements of source < number of ones in mask"),
    "segment_lengths_sum": (
        lambda n: torch.segment_reduce(ONES.to(n.device), "sum", lengths=n),
        torch.tensor([2, 2]), torch.tensor([1, 2]), RuntimeError, "lengths along axis to sum"),
    "segment_lengths_negative": (
        lambda n: torch.segment_reduce(ONES.to(n.device), "sum", lengths=n),
        torch.tensor([4, -1]), torch.tensor([3, 0]), RuntimeError, "segment length is negative"),
    "segment_offsets_decreasing": (
        lambda o: torch.segment_reduce(ONES.to(o.device), "max", offsets=o),
        torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 1, 3]), RuntimeError,
        "segment length is negative"),
    "lu_solve_pivots": (
        lambda p: torch.linalg.lu_solve(torch.eye(2, device=p.device), p,
                                        torch.ones(2, 1, device=p.device)),
        torch.tensor([3, 2], dtype=torch.int32), torch.tensor([2, 2], dtype=torch.int32),
        RuntimeError, "Pivots given to lu_solve must all be between 1 and"),
    "lu_solve_pivot_0": (
        lambda p: torch.linalg.lu_solve(torch.eye(2, device=p.device), p,
                                        torch.ones(2, 1, device=p.device), adjoint=True),
        torch.tensor([0, 2], dtype=torch.int32), torch.tensor([1, 2], dtype=torch.int32),
        RuntimeError, "Pivots given to lu_solve must all be between 1 and"),
    "multilabel_margin_target": (
        lambda t: F.multilabel_margin_loss(torch.arange(3.0, device=t.device).view(1, 3), t),
        torch.tensor([[0, 7, -1]]), torch.tensor([[2, -1, 1]]), RuntimeError,
        "target out of range in lazyxla::multilabel_margin_loss"),
    # a 0-dim tensor has one position along dim 0 (these computed with any index before)
    "index_add_0d": (
        lambda i: torch.zeros((), device=i.device).index_add(0, i, torch.ones((), device=i.device)),
        torch.tensor([1]), torch.tensor([0]), IndexError, "index out of range in aten.index_add"),
    "index_copy_0d": (
        lambda i: torch.zeros((), device=i.device).index_copy(0, i, torch.ones((), device=i.device)),
        torch.tensor([-1]), torch.tensor([0]), IndexError, "index out of range in aten.index_copy"),
    "index_fill_0d": (
        lambda i: torch.zeros((), device=i.device).index_fill(0, i, 1.0),
        torch.tensor([1]), torch.tensor([-1]), IndexError, "index out of range in aten.index_fill"),
    "index_select_0d": (
        lambda i: torch.tensor(3.0, device=i.device).index_select(0, i),
        torch.tensor([1]), torch.tensor([0]), IndexError, "index out of range in aten.index_select"),
    "gather_0d": (
        lambda i: torch.gather(torch.tensor(3.0, device=i.device), 0, i),
        torch.tensor([-1]), torch.tensor([0]), RuntimeError, "index out of bounds in aten.gather"),
    "index_add_2d": (
        lambda i: torch.zeros(2, 3, device=i.device).index_add(0, i, torch.ones(1, 3, device=i.device)),
        torch.tensor([2]), torch.tensor([1]), RuntimeError, "index out of bounds in aten.index_add"),
    "embedding_bag_index": (
        lambda i: F.embedding_bag(i, torch.ones(5, 2, device=i.device),
                                  torch.tensor([0], device=i.device)),
        torch.tensor([1, 5]), torch.tensor([1, 4]), RuntimeError,
        r"not in the valid range \[0, num_embeddings\) .in aten._embedding_bag"),
    "ctc_input_lengths": (
        lambda n: F.ctc_loss(CTC_LOG_PROBS.to(n.device), torch.tensor([[1, 2], [1, 1]], device=n.device),
                             n, torch.tensor([2, 2], device=n.device)),
        torch.tensor([9, 6]), torch.tensor([5, 6]), RuntimeError,
        "input_lengths must be at most the input's length"),
}


@pytest.mark.parametrize("case", REJECTED.values(), ids=REJECTED.keys())
def test_values_eager_rejects_raise_and_values_it_accepts_match(case):
    op, bad, good, error, message = case
    assert eager_error(op, bad) is error  # eager raises at the call
    with pytest.raises(error, match=message) as raised:
        op(bad.to(D)).cpu()
    assert type(raised.value) is error
    torch.testing.assert_close(op(good.to(D)).cpu(), op(good))
