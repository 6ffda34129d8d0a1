"""flex_attention on lazyxla: PyTorch's frontend refused the device ("FlexAttention is only
supported on CUDA, CPU, HPU, or MPS devices"); its dense implementation records like any other
ops, in lazy mode and under torch.compile, forward and backward."""
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")


def _qkv(heads_q=2, heads_kv=2, seq=16, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, heads_q, seq, dim, generator=g), torch.randn(2, heads_kv, seq, dim, generator=g),
            torch.randn(2, heads_kv, seq, dim, generator=g))


def _lazy(*ts):
    return tuple(t.to(D) for t in ts)


def _close(actual, expected):
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


def _causal(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


def test_score_mods_match_the_cpu_in_lazy_mode_and_compiled():
    q, k, v = _qkv()
    table = torch.randn(16, 16)
    table_d = table.to(D)
    mods = {  # (score_mod on the CPU, the same on lazyxla: a captured tensor lives on its device)
        "causal": (_causal, _causal),
        "relative bias": ((lambda s, b, h, i, j: s + (i - j).to(s.dtype) * 0.1),) * 2,
        "captured table": (lambda s, b, h, i, j: s + table[i, j], lambda s, b, h, i, j: s + table_d[i, j]),
    }
    for name, (on_cpu, on_device) in mods.items():
        expected = flex_attention(q, k, v, score_mod=on_cpu)
        _close(flex_attention(*_lazy(q, k, v), score_mod=on_device), expected)
        # fullgraph: the device check is traced, not a graph break that ran the attention outside
        compiled = torch.compile(lambda a, b, c, m=on_device: flex_attention(a, b, c, score_mod=m),
                                 backend="lazyxla", fullgraph=True)
        _close(compiled(*_lazy(q, k, v)), expected)


def test_gqa_scale_and_logsumexp_match_the_cpu():
    q, k, v = _qkv(heads_q=4, heads_kv=2)
    lse = AuxRequest(lse=True)
    out, aux = flex_attention(*_lazy(q, k, v), enable_gqa=True, scale=0.3, return_aux=lse)
    expected, expected_aux = flex_attention(q, k, v, enable_gqa=True, scale=0.3, return_aux=lse)
    _close(out, expected)
    _close(aux.lse, expected_aux.lse)


def test_max_scores_which_the_cpu_refuses():
    q, k, v = _qkv()
    _, aux = flex_attention(*_lazy(q, k, v), return_aux=AuxRequest(lse=True, max_scores=True))
    scores = q @ k.transpose(-1, -2) / 8 ** 0.5
    _close(aux.max_scores, scores.amax(-1))
    _close(aux.lse, scores.logsumexp(-1))


def test_a_block_mask_made_on_the_device_masks_like_the_cpu_one():
    q, k, v = _qkv()
    doc = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)
    doc_d = doc.to(D)

    def documents(on):
        return lambda b, h, i, j: (on[i] == on[j]) & (i >= j)
    mask = create_block_mask(documents(doc), None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
    mask_d = create_block_mask(documents(doc_d), None, None, 16, 16, device=D, BLOCK_SIZE=8)
    _close(flex_attention(*_lazy(q, k, v), block_mask=mask_d), flex_attention(q, k, v, block_mask=mask))


def _reference_grads(q, k, v):
    """Causal attention's input grads through plain ops (PyTorch's CPU flex_attention has no
    backward)."""
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    (out * out).sum().backward()
    return out.detach(), [t.grad for t in (q, k, v)]


@pytest.mark.parametrize("compiled", [False, True])
def test_training_through_flex_attention_gives_the_reference_grads(compiled):
    q, k, v = _qkv(seed=1)
    expected, expected_grads = _reference_grads(q, k, v)
    fn = lambda a, b, c: flex_attention(a, b, c, score_mod=_causal)  # noqa: E731
    if compiled:
        fn = torch.compile(fn, backend="lazyxla", fullgraph=True)
    for step in range(2):  # compiled: the second step replays the programs, no retrace
        retraces = metrics.counter_value("DynamoRetrace") or 0
        leaves = [t.requires_grad_() for t in _lazy(q, k, v)]
        out = fn(*leaves)
        (out * out).sum().backward()
        _close(out.detach(), expected)
        for leaf, grad in zip(leaves, expected_grads):
            _close(leaf.grad, grad)
        if step and compiled:
            assert (metrics.counter_value("DynamoRetrace") or 0) == retraces


def test_other_devices_keep_the_frontends_checks():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="same device type"):
        flex_attention(q.to(D), k, v)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q.clone().requires_grad_(), k, v)
