"""Decompositions lazyxla adds to torch._decomp's: ops PyTorch gives no decomposition whose eager
CPU kernels are compositions of other ops. Each follows its kernel's steps in torch ops, which
dispatch back to the device and are recorded, so they compute what eager computes, round alike
and raise eager's errors where the steps raise them.

The attention fast path: nn.MultiheadAttention and nn.TransformerEncoderLayer call
`_native_multi_head_attention` and `_transformer_encoder_layer_fwd` in inference (eval mode, no
autograd, batch_first) on lazyxla's device as on the CPU. Both ran on the CPU before."""
from __future__ import annotations

import torch

aten = torch.ops.aten
DECOMPOSITIONS: dict = {}  # OpOverload -> fn(*args, **kwargs), consulted before torch._decomp's


def decomposes(op):
    def deco(fn):
        DECOMPOSITIONS[op] = fn
        return fn
    return deco


def _check(holds, message):
    if not holds:
        raise RuntimeError(message)


def _mha_checks(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias):
    """native_multi_head_attention_cpu's checks, in its order and words."""
    d = embed_dim
    _check(query.dim() == 3, f"expected 3-D `query`, got {query.dim()}-D tensor")
    _check(query.shape[2] == d,
           f"passed-in embed_dim {d} didn't match last dim of query {query.shape[2]}")
    _check(key.dim() == 3, f"expected 3-D `key`, got {key.dim()}-D tensor")
    _check(value.dim() == 3, f"expected 3-D `value`, got {value.dim()}-D tensor")
    _check(query.shape == key.shape == value.shape, "expected `query`/`key`/`value` shapes to match")
    _check(qkv_weight.dim() == 2, f"expected 2-D `qkv_weight`, got {qkv_weight.dim()}-D tensor")
    _check(d * 3 == qkv_weight.shape[0], "expected `qkv_weight` first dim to be 3x embed_dim")
    _check(d == qkv_weight.shape[1], "expected `qkv_weight` second dim to be embed_Dim")
    _check(qkv_bias.dim() == 1, f"expected 1-D `qkv_bias`, got {qkv_bias.dim()}-D tensor")
    _check(qkv_bias.shape[0] == 3 * d,
           "expected `qkv_bias` first dim and first dim of query to be equal")
    # (eager divides by num_head unchecked: 0 stops the process)
    _check(num_head > 0, f"`num_heads` must be positive, got {num_head}")
    _check(d % num_head == 0, "`embed_dim` must divide evenly by `num_heads`")


def _qkv_projection(query, key, value, embed_dim, qkv_weight):
    """(B, T, 3 * D): one product for self-attention, else one per projection."""
    if key is value:
        if query is key:
            return torch.matmul(query, qkv_weight.t())
        w_q, w_kv = qkv_weight.split_with_sizes([embed_dim, 2 * embed_dim])
        return torch.cat([torch.matmul(query, w_q.t()), torch.matmul(key, w_kv.t())], 2)
    w_q, w_k, w_v = qkv_weight.chunk(3)
    return torch.cat([torch.matmul(query, w_q.t()), torch.matmul(key, w_k.t()),
                      torch.matmul(value, w_v.t())], 2)


@decomposes(aten._native_multi_head_attention.default)
def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                proj_weight, proj_bias, mask=None, need_weights=True,
                                average_attn_weights=True, mask_type=None):
    _mha_checks(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias)
    qkv = _qkv_projection(query, key, value, embed_dim, qkv_weight)
    if qkv.numel() == 0:
        return torch.empty_like(query), None  # (eager's undefined weights: None)
    q, k, v = aten._transform_bias_rescale_qkv(qkv, qkv_bias, num_head)
    b, h, t, dh = q.shape
    scores = torch.bmm(q.reshape(b * h, t, dh), k.reshape(b * h, t, dh).transpose(1, 2))
    scores = scores.view(b, h, t, t)
    if mask is None:
        weights = aten._softmax(scores, 3, False)
    else:  # (eager: a mask of another dtype masks where it is nonzero)
        weights = aten._masked_softmax(scores, mask.to(torch.bool), 3, mask_type)
    context = torch.bmm(weights.view(b * h, t, t), v.reshape(b * h, t, dh)).view(b, h, t, dh)
    merged = context.permute(0, 2, 1, 3).reshape(b * t, h * dh)
    out = torch.nn.functional.linear(merged, proj_weight, proj_bias)
    out = out.view(b, t, out.shape[1])
    if not need_weights:  # (eager's undefined tensor)
        return out, None
    if average_attn_weights:
        weights = weights.sum(1) / num_head
    return out, weights


def _layer_norm(x, embed_dim, eps, weight, bias):
    return torch.layer_norm(x, [embed_dim], weight, bias, eps)


def _ffn(x, w1, b1, w2, b2, use_gelu):
    _check(x.dim() == 3, "batched input size should be 3")
    _check(w1.dim() == 2, "2d weights expected")
    _check(w2.dim() == 2, "2d weights expected")
    b, t = x.shape[:2]
    hidden = aten._addmm_activation(b1, x.reshape(b * t, x.shape[2]), w1.t(), use_gelu=use_gelu)
    return torch.addmm(b2, hidden, w2.t()).view(b, t, -1)


@decomposes(aten._transformer_encoder_layer_fwd.default)
def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                  proj_bias, use_gelu, norm_first, eps, norm_weight_1,
                                  norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                                  ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                  mask_type=None):
    if src.numel() == 0:
        return src.clone()
    x = _layer_norm(src, embed_dim, eps, norm_weight_1, norm_bias_1) if norm_first else src
    x = aten._native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                          proj_weight, proj_bias, mask, False, True, mask_type)[0]
    x = x + src
    if not norm_first:
        x = _layer_norm(x, embed_dim, eps, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = _layer_norm(x, embed_dim, eps, norm_weight_2, norm_bias_2)
    x = _ffn(x, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, use_gelu) + residual
    if not norm_first:
        x = _layer_norm(x, embed_dim, eps, norm_weight_2, norm_bias_2)
    return x


@decomposes(aten.col2im.default)
def col2im(x, output_size, kernel_size, dilation, padding, stride):
    """F.fold. A float16 / bfloat16 one as eager's col2im kernel adds in the dtype: kernel offset
    after kernel offset, each addition rounded (PyTorch's decomposition sums in float32 once);
    other dtypes, and the argument checks, are PyTorch's decomposition."""
    from torch._decomp import decomposition_table
    reference = decomposition_table[aten.col2im.default]
    if x.dtype not in (torch.float16, torch.bfloat16):
        return reference(x, output_size, kernel_size, dilation, padding, stride)
    reference(x.to("meta"), output_size, kernel_size, dilation, padding, stride)  # (the checks)
    batched = x.dim() == 3
    cols = x if batched else x.unsqueeze(0)
    (h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw) = output_size, kernel_size, dilation, padding, stride
    oh, ow = ((o + 2 * p - d * (k - 1) - 1) // s + 1 for o, p, d, k, s in
              zip(output_size, padding, dilation, kernel_size, stride))
    n, c = cols.shape[0], cols.shape[1] // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    out = cols.new_zeros((n, c, h, w))
    for i in range(kh):
        for j in range(kw):
            placed = cols.new_zeros((n, c, h + 2 * ph + sh, w + 2 * pw + sw))
            placed[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] = \
                blocks[:, :, i, j]
            out = out + placed[:, :, ph:ph + h, pw:pw + w]
    return out if batched else out.squeeze(0)


def _kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                   device=None, pin_memory=None):
    """Eager's kaiser_window: I0(beta * sqrt(|1 - ((n - alpha) / alpha)^2|)) / I0(beta) over
    n = 0..N-1 (N one more when periodic, the last dropped), alpha = (N - 1) / 2, in the dtype's
    math type (float32 for halves). Its CPU kernel is a DispatchStub, which no Python device
    has (an internal assert)."""
    dtype = dtype or torch.get_default_dtype()
    # eager's checks and messages (window length, dtype, layout), from the meta device
    torch.kaiser_window(window_length, periodic, beta, dtype=dtype, layout=layout, device="meta")
    if window_length <= 1:
        return (torch.ones if window_length else torch.empty)(window_length, dtype=dtype, device=device)
    n = window_length + 1 if periodic else window_length
    math = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    alpha = (n - 1) / 2.0
    ratio = (torch.arange(n, dtype=dtype, device=device).to(math) - alpha) / alpha
    window = torch.special.i0(beta * torch.sqrt(torch.abs(1 - ratio * ratio))) / \
        torch.special.i0(torch.tensor(beta, dtype=math, device=device))
    return window[:window_length].to(dtype) if periodic else window.to(dtype)


for _op in (aten.kaiser_window.default, aten.kaiser_window.periodic, aten.kaiser_window.beta):
    decomposes(_op)(_kaiser_window)
