"""PyTorch's attention fast path: nn.MultiheadAttention and nn.TransformerEncoderLayer in
inference call `_native_multi_head_attention` and `_transformer_encoder_layer_fwd` on lazyxla's
device as on the CPU. They ran on the CPU (a fallback per layer, ViT's every block); they are now
decomposed into lowered ops, `_masked_softmax` and `_transform_bias_rescale_qkv` among them, and
give eager's values and errors."""
import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()
aten = torch.ops.aten
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _mask(*shape, seed=1):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.6


def _on_device(args):
    return [a.to(D) if isinstance(a, torch.Tensor) else a for a in args]


def _no_fallback(fn):
    before = metrics.executed_fallback_ops()
    out = fn()
    lazyxla.sync()
    assert metrics.executed_fallback_ops() == before
    return out


def _same_error(op, args):
    """The op raises on lazyxla what it raises in eager, at the call."""
    with pytest.raises(Exception) as eager:
        op(*args)
    with pytest.raises(type(eager.value)) as got:
        op(*_on_device(args))
    assert str(got.value).splitlines()[0] == str(eager.value).splitlines()[0]


# ------------------------------------------------------------------------------- _masked_softmax

X = _rand(2, 2, 3, 3)
_FULL = _mask(2, 2, 3, 3)
_FULL[0, 0, 1, :] = _FULL[0, 0, :, 2] = True  # a row and a column fully masked
MASKS = {  # (mask, mask_type): a fully masked row in each, whose result is NaN
    "src mask (L, L)": (torch.tensor([[False, True, True], [True, True, True], [False, False, True]]), 0),
    "key padding (B, L)": (torch.tensor([[False, True, False], [True, True, True]]), 1),
    "mask of the input's shape": (_FULL, 2),
}


@pytest.mark.parametrize("dim", [3, -1, 2, None])
@pytest.mark.parametrize("which", MASKS, ids=list(MASKS))
def test_masked_softmax_gives_eagers_values(which, dim):
    mask, mask_type = MASKS[which]
    want = aten._masked_softmax(X, mask, dim, mask_type)
    got = _no_fallback(lambda: aten._masked_softmax(X.to(D), mask.to(D), dim, mask_type).cpu())
    assert want.isnan().any()  # (the fully masked row)
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_masked_softmax_in_each_floating_dtype(dtype):
    x, (mask, _) = _rand(2, 2, 3, 3, dtype=dtype) * 4, MASKS["mask of the input's shape"]
    want = aten._masked_softmax(x, mask, 3, 2)
    got = aten._masked_softmax(x.to(D), mask.to(D), 3, 2).cpu()
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, equal_nan=True)


def test_masked_softmax_of_a_0_dim_tensor():
    for masked in (False, True):
        x, m = torch.tensor(1.5), torch.tensor(masked)
        torch.testing.assert_close(aten._masked_softmax(x.to(D), m.to(D), None, 2).cpu(),
                                   aten._masked_softmax(x, m, None, 2), equal_nan=True)


@pytest.mark.parametrize("args", [
    (X, MASKS["key padding (B, L)"][0].float(), 3, 1),   # not a boolean mask
    (X, MASKS["key padding (B, L)"][0], 3, None),        # no mask type
    (X, MASKS["key padding (B, L)"][0], 3, 5),           # an unknown one
    (X, MASKS["key padding (B, L)"][0][:, :2], 3, 1),    # a padding mask of another length
    (X, torch.zeros(3, 2, dtype=torch.bool), 3, 0),     # a src mask of another shape
    (X, torch.zeros(1, 2, 3, 3, dtype=torch.bool), 3, 2),  # type 2 does not broadcast
    (X[0], MASKS["src mask (L, L)"][0], 2, 0),           # 3-d input: the mask must be its shape
    (X, MASKS["key padding (B, L)"][0], 4, 1),           # dim out of range
    (X.int(), MASKS["key padding (B, L)"][0], 3, 1),     # not floating
], ids=["float mask", "no type", "type 5", "short padding mask", "bad src mask", "type 2 shape",
        "3-d input", "dim 4", "int input"])
def test_masked_softmax_raises_eagers_errors(args):
    _same_error(aten._masked_softmax, args)


def test_masks_eager_reads_out_of_line_raise():
    """Eager checks a padding or src mask against the query length only; with another key length
    it reads the mask out of line and returns wrong numbers. lazyxla refuses such masks."""
    x = _rand(2, 2, 3, 4).to(D)
    for mask, mask_type in ((torch.zeros(2, 3, dtype=torch.bool), 1), (torch.zeros(3, 3, dtype=torch.bool), 0)):
        with pytest.raises(RuntimeError, match=f"mask_type == {mask_type} mask shape should be"):
            aten._masked_softmax(x, mask.to(D), 3, mask_type)


def test_masked_softmax_gradient_matches_eager():
    mask, grad = _mask(2, 2, 3, 3), _rand(2, 2, 3, 3, seed=4)
    x = X.clone().requires_grad_()
    aten._masked_softmax(x, mask, 3, 2).backward(grad)
    xd = X.to(D).requires_grad_()
    aten._masked_softmax(xd, mask.to(D), 3, 2).backward(grad.to(D))
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    out = aten._masked_softmax(X, mask, 2, 2)  # the backward op itself, over another dim
    want = aten._masked_softmax_backward(grad, out, mask, 2)
    got = _no_fallback(lambda: aten._masked_softmax_backward(grad.to(D), out.to(D), mask.to(D), 2).cpu())
    torch.testing.assert_close(got, want)
    _same_error(aten._masked_softmax_backward, (grad, out, mask[0], 3))  # eager's shape check


# ------------------------------------------------------------------ _transform_bias_rescale_qkv

@pytest.mark.parametrize("dtype", FLOATS)
def test_transform_bias_rescale_qkv_gives_eagers_heads(dtype):
    qkv, bias = _rand(2, 5, 24, dtype=dtype), _rand(24, dtype=dtype, seed=2)
    want = aten._transform_bias_rescale_qkv(qkv, bias, 2)
    got = _no_fallback(lambda: [t.cpu() for t in aten._transform_bias_rescale_qkv(qkv.to(D), bias.to(D), 2)])
    for g, w in zip(got, want):
        assert g.shape == w.shape == (2, 2, 5, 4) and g.dtype == dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("args", [
    (_rand(2, 5, 24), _rand(24), 5),   # D % num_head
    (_rand(2, 5, 23), _rand(23), 1),   # 3 D
    (_rand(5, 24), _rand(24), 2),      # not 3-d
    (_rand(2, 5, 24).int(), _rand(24).int(), 2),
], ids=["heads", "not 3 D", "2-d", "int"])
def test_transform_bias_rescale_qkv_raises_eagers_errors(args):
    _same_error(aten._transform_bias_rescale_qkv, args)


def test_a_bias_eager_would_misread_raises():
    """Eager reads a bias of the wrong length or dtype as if it were right (out of bounds, or
    double bytes as floats)."""
    qkv = _rand(2, 5, 24).to(D)
    with pytest.raises(RuntimeError, match="expected a `qkv_bias` of 24 elements"):
        aten._transform_bias_rescale_qkv(qkv, _rand(20).to(D), 2)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        aten._transform_bias_rescale_qkv(qkv, _rand(24).double().to(D), 2)


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation_is_lowered(use_gelu):
    """The encoder layer's feed-forward op; it ran on the CPU (its kernel calls the out= form)."""
    b, x, w = _rand(4), _rand(3, 5, seed=1), _rand(4, 5, seed=2)
    want = aten._addmm_activation(b, x, w.t(), use_gelu=use_gelu)
    got = _no_fallback(lambda: aten._addmm_activation(b.to(D), x.to(D), w.t().to(D), use_gelu=use_gelu).cpu())
    torch.testing.assert_close(got, want)


# ------------------------------------------------------------------------ the modules' fast path

def _decomposed(name):
    return metrics.counter_value(f"lazyxla::decomposed::aten.{name}.default") or 0


MHA_CALLS = {
    "plain": lambda m: {},
    "no weights": lambda m: dict(need_weights=False),
    "weights per head": lambda m: dict(average_attn_weights=False),
    "key padding mask": lambda m: dict(key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2])),
    "attention mask": lambda m: dict(attn_mask=_mask(5, 5, seed=3)),
    "both masks": lambda m: dict(attn_mask=_mask(5, 5, seed=3),
                                 key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2])),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("call", MHA_CALLS, ids=list(MHA_CALLS))
def test_multihead_attention_fast_path_matches_eager(call, dtype):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval().to(dtype)
    x, kwargs = _rand(2, 5, 16, dtype=dtype), MHA_CALLS[call](None)
    with torch.no_grad():
        want = mha(x, x, x, **kwargs)
        mha.to(D)
        xd = x.to(D)
        before = _decomposed("_native_multi_head_attention")
        got = _no_fallback(lambda: mha(xd, xd, xd, **{k: v.to(D) for k, v in kwargs.items()
                                                      if isinstance(v, torch.Tensor)},
                                       **{k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}))
    assert _decomposed("_native_multi_head_attention") == before + 1  # (the fast path was taken)
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=1e-2)
    torch.testing.assert_close(got[0].cpu(), want[0], **tol)
    if want[1] is None:
        assert got[1] is None
    else:
        torch.testing.assert_close(got[1].cpu(), want[1], **tol)


@pytest.mark.parametrize("projections", ["key is value", "all three differ"])
def test_native_attention_projects_other_keys_and_values(projections):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    q, k = _rand(2, 5, 16), _rand(2, 5, 16, seed=1)
    v = k if projections == "key is value" else _rand(2, 5, 16, seed=2)
    params = [mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias]
    with torch.no_grad():
        want = aten._native_multi_head_attention(q, k, v, 16, 2, *params)
        kd = k.to(D)
        vd = kd if v is k else v.to(D)
        got = _no_fallback(lambda: aten._native_multi_head_attention(q.to(D), kd, vd, 16, 2, *[p.to(D) for p in params]))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)


_W = [_rand(48, 16), _rand(48, seed=1), _rand(16, 16, seed=2), _rand(16, seed=3)]
_Q = _rand(2, 5, 16)


@pytest.mark.parametrize("args", [
    (_Q[0], _Q[0], _Q[0], 16, 2, *_W),
    (_Q, _Q, _Q, 12, 2, *_W),
    (_Q, _Q[:, :3], _Q[:, :3], 16, 2, *_W),
    (_Q, _Q, _Q, 16, 3, *_W),
    (_Q, _Q, _Q, 16, 2, _W[0][:40], *_W[1:]),
    (_Q, _Q, _Q, 16, 2, _W[0], _W[1][:40], *_W[2:]),
    (_Q, _Q, _Q, 16, 2, *_W[:2], _rand(16, 8), _W[3]),
    (_Q, _Q, _Q, 16, 2, *_W, torch.zeros(5, 5, dtype=torch.bool), True, True, None),
], ids=["2-d query", "embed_dim", "key shape", "heads", "qkv_weight", "qkv_bias", "out projection",
        "mask without a type"])
def test_native_attention_raises_eagers_errors(args):
    _same_error(aten._native_multi_head_attention, args)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", ["none", "src mask", "padding mask"])
def test_transformer_encoder_fast_path_matches_eager(activation, norm_first, mask):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, activation=activation,
                                             norm_first=norm_first)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = _rand(2, 5, 16)
    kwargs = {"none": {}, "src mask": dict(mask=_mask(5, 5, seed=3)),
              "padding mask": dict(src_key_padding_mask=torch.tensor([[False] * 5, [False] * 4 + [True]]))}[mask]
    with torch.no_grad():
        want = model(x, **kwargs)
        model.to(D)
        before = _decomposed("_transformer_encoder_layer_fwd")
        got = _no_fallback(lambda: model(x.to(D), **{k: v.to(D) for k, v in kwargs.items()}).cpu())
    assert _decomposed("_transformer_encoder_layer_fwd") == before + 2
    torch.testing.assert_close(got, want, equal_nan=True)


def test_compiled_encoder_runs_the_fast_path_in_one_program():
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True),
                                        2, enable_nested_tensor=False).eval()
    x = _rand(2, 5, 16)
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model.to(D), backend="lazyxla")
        before = _decomposed("_transformer_encoder_layer_fwd")
        got = _no_fallback(lambda: compiled(x.to(D)).cpu())
    assert _decomposed("_transformer_encoder_layer_fwd") > before  # (Dynamo kept the fused op)
    torch.testing.assert_close(got, want)
