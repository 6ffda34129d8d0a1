"""F.embedding_bag / nn.EmbeddingBag lowered (it ran through the CPU fallback), forward and backward."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
torch.manual_seed(0)
W = torch.randn(10, 3)
IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 4])
OFFSETS = torch.tensor([0, 0, 4, 6])  # an empty first bag
LAST = torch.tensor([0, 0, 4, 9])     # include_last_offset: the last offset closes the last bag


def _run(dev, idx=IDX, offsets=OFFSETS, psw=None, **kwargs):
    w = W.clone().to(dev).requires_grad_()
    p = None if psw is None else psw.clone().to(dev).requires_grad_()
    offsets = None if offsets is None else offsets.to(dev)
    out = F.embedding_bag(idx.to(dev), w, offsets, per_sample_weights=p, **kwargs)
    (out * torch.arange(out.numel(), dtype=out.dtype).view_as(out).to(dev)).sum().backward()
    return [t.detach().cpu() for t in (out, w.grad) + (() if p is None else (p.grad,))]


CASES = {
    "sum": dict(mode="sum"), "mean": dict(mode="mean"), "max": dict(mode="max"),
    "sum_padding": dict(mode="sum", padding_idx=4), "mean_padding": dict(mode="mean", padding_idx=4),
    "max_padding": dict(mode="max", padding_idx=4),
    "per_sample_weights": dict(mode="sum", psw=torch.rand(9)),
    "per_sample_weights_padding": dict(mode="sum", psw=torch.rand(9), padding_idx=2),
    "include_last_offset": dict(mode="sum", offsets=LAST, include_last_offset=True),
    "max_include_last_offset": dict(mode="max", offsets=LAST, include_last_offset=True),
    "2d_input": dict(mode="mean", idx=IDX[:8].view(2, 4), offsets=None),
}


@pytest.mark.parametrize("kwargs", CASES.values(), ids=CASES.keys())
def test_embedding_bag_matches_eager_without_fallback(kwargs):
    before = set(metrics.executed_fallback_ops())
    got = _run(D, **dict(kwargs))
    assert not set(metrics.executed_fallback_ops()) - before
    for g, e in zip(got, _run("cpu", **dict(kwargs))):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_divides_by_each_rows_count(mode):
    """Each row's gradient divided by how often the row occurs in the batch (PyTorch's CUDA rule;
    its CPU kernel divides some rows by another row's count, e.g. row 9 here)."""
    _, got, = _run(D, mode=mode, scale_grad_by_freq=True)[:2]
    _, plain = _run("cpu", mode=mode)[:2]
    freq = torch.bincount(IDX, minlength=10).clamp(min=1).to(plain.dtype)
    torch.testing.assert_close(got, plain / freq[:, None])
