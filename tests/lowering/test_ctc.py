"""F.ctc_loss / nn.CTCLoss lowered (it ran through the CPU fallback): _ctc_loss and its backward,
with int[] and tensor lengths, forward and backward, compared with eager on the CPU."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics
from lazyxla.testing import to_dev

D = lazyxla.device()
aten = torch.ops.aten
torch.manual_seed(0)
T, N, C = 8, 3, 5
LOG_PROBS = torch.randn(T, N, C).log_softmax(-1)
# sample 0: a repeated label (needs a blank between the 2s); 1: padded with -1 past its length;
# 2: [1, 1, 1] needs 5 frames but has 3: no alignment, an infinite loss
TARGETS = torch.tensor([[2, 2, 3], [4, 1, -1], [1, 1, 1]])
INPUT_LENGTHS, TARGET_LENGTHS = torch.tensor([8, 6, 3]), torch.tensor([3, 2, 3])
CONCATENATED = torch.tensor([2, 2, 3, 4, 1, 1, 1, 1])


def _run(dev, log_probs, *args, **kwargs):
    """(loss, gradient of log_probs), each output weighted differently, read in one program."""
    x = log_probs.clone().to(dev).requires_grad_()
    loss = F.ctc_loss(x, *(to_dev(args) if dev == D else args), **kwargs)
    weights = torch.arange(1, loss.numel() + 1, dtype=loss.dtype).view_as(loss).to(dev)
    (loss * weights).sum().backward()
    if dev == D:
        lazyxla.sync()
    return loss.detach().cpu(), x.grad.cpu()


def _check(log_probs, *args, **kwargs):
    """Same loss and gradient as eager (NaNs included), without the CPU fallback."""
    before = set(metrics.executed_fallback_ops())
    got = _run(D, log_probs, *args, **kwargs)
    assert not set(metrics.executed_fallback_ops()) - before
    expected = _run("cpu", log_probs, *args, **kwargs)
    torch.testing.assert_close(got, expected, equal_nan=True)
    return got


BLANK_LAST = torch.tensor([[2, 2, 3], [0, 1, 0], [1, 1, 1]])  # for blank=4, the last class
CASES = {  # (log_probs, targets, input_lengths, target_lengths, kwargs): a few programs, each path
    "none": (LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, dict(reduction="none")),
    "none_zero_infinity": (LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS,
                           dict(reduction="none", zero_infinity=True)),
    "mean_zero_infinity": (LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS,
                           dict(reduction="mean", zero_infinity=True)),
    "sum_float64_blank_last": (LOG_PROBS.double(), BLANK_LAST, INPUT_LENGTHS, TARGET_LENGTHS,
                               dict(reduction="sum", blank=4)),
    "int_lengths_mean": (LOG_PROBS, TARGETS, (8, 6, 3), (3, 2, 3), dict(reduction="mean")),
    "int_lengths_concatenated_sum_zero_infinity": (LOG_PROBS, CONCATENATED, (8, 6, 3), (3, 2, 3),
                                                   dict(reduction="sum", zero_infinity=True)),
    # (ctc_loss reads tensor lengths to the CPU for concatenated targets: the program above)
    "tensor_lengths_concatenated": (LOG_PROBS, CONCATENATED, INPUT_LENGTHS, TARGET_LENGTHS,
                                    dict(reduction="sum", zero_infinity=True)),
    "unbatched": (LOG_PROBS[:, 0], TARGETS[0], torch.tensor(8), torch.tensor(3),
                  dict(reduction="none")),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_ctc_loss_matches_eager(case):
    *args, kwargs = case
    _check(*args, **kwargs)


def test_infeasible_target_is_infinite_and_zero_infinity_zeroes_it():
    """Sample 2 has no alignment: an infinite loss and NaN gradients, as eager; zero_infinity makes
    both 0. (The programs of the "none" cases above.)"""
    loss, grad = _check(LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none")
    assert loss[2] == float("inf") and torch.isfinite(loss[:2]).all()
    assert grad[:3, 2].isnan().all() and torch.isfinite(grad[:, :2]).all()
    loss, grad = _check(LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none",
                        zero_infinity=True)
    assert loss[2] == 0 and (grad[:, 2] == 0).all()


def test_gradient_is_zero_beyond_each_input_length():
    _, grad = _check(LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none",
                     zero_infinity=True)
    assert (grad[6:, 1] == 0).all() and (grad[3:, 2] == 0).all()


def test_empty_target_and_empty_input():
    """An empty target's loss is that of all blanks; an empty input aligns only an empty target
    (else +inf), and gets no gradient."""
    loss, grad = _check(LOG_PROBS, TARGETS, torch.tensor([8, 0, 0]), torch.tensor([0, 0, 2]),
                        reduction="none")
    assert loss[1] == 0 and loss[2] == float("inf") and (grad[:, 1:] == 0).all()


def test_new_length_values_compile_nothing():
    """Tensor lengths are runtime values of the program: other values reuse it."""
    _run(D, LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none")
    lengths = torch.tensor([7, 8, 6]), torch.tensor([1, 2, 2])
    with lazyxla.assert_no_recompile():
        got = _run(D, LOG_PROBS, TARGETS, *lengths, reduction="none")
    torch.testing.assert_close(got, _run("cpu", LOG_PROBS, TARGETS, *lengths, reduction="none"))


def test_log_alpha_where_the_cpu_kernel_writes_it():
    """_ctc_loss's log_alpha (N, T, 2 * max target length + 1): eager writes it up to each input
    length and 2 * target length + 1 states, and all of t = 0; it is -inf elsewhere here."""
    il, tl = [8, 6, 0], [3, 1, 0]
    nll, log_alpha = aten._ctc_loss(LOG_PROBS, TARGETS, il, tl)
    got_nll, got = (t.cpu() for t in aten._ctc_loss(LOG_PROBS.to(D), TARGETS.to(D), il, tl))
    assert got.shape == log_alpha.shape == (N, T, 7)
    torch.testing.assert_close(got_nll, nll)
    torch.testing.assert_close(got[:, 0], log_alpha[:, 0])
    written = torch.zeros(got.shape, dtype=torch.bool)
    for b in range(N):
        written[b, :il[b], :2 * tl[b] + 1] = True
    torch.testing.assert_close(got[written], log_alpha[written])
    assert (got[~written] == float("-inf")).all()


def test_lengths_eager_rejects_are_flagged_with_index_checks():
    before = lazyxla.index_checks()
    lazyxla.set_index_checks("strict")
    try:
        with pytest.raises(RuntimeError, match="input_lengths must be at most"):  # as eager
            F.ctc_loss(LOG_PROBS.to(D), TARGETS.to(D), torch.tensor([9, 6, 3]).to(D),
                       TARGET_LENGTHS.to(D)).cpu()
    finally:
        lazyxla.set_index_checks(before)
