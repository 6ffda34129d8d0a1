"""torch.autocast("lazyxla"): mixed precision with CUDA's op policy.

PyTorch registers autocast kernels for its own devices only; for PrivateUse1 every op reaching the
AutocastPrivateUse1 key failed. Here the key falls through for ops without a policy, and the ops of
CUDA's lists (aten/src/ATen/autocast_mode.cpp) cast their floating lazyxla arguments, float64
excepted, then run below autocast:
  - lower precision (matmuls, convolutions, attention, RNN cells): to the autocast dtype;
  - fp32 (pointwise ops that lose range, norms, losses, upsampling): to float32;
  - fp32 unless a dtype is given (sum, prod, cumsum, softmax, log_softmax, vector norms): an
    eligible first argument makes them compute and return float32;
  - promote (addcmul, dot, index_put, ...): to the widest floating dtype among the arguments.
binary_cross_entropy raises, as on CUDA. Casts are recorded ops like any other, so under
torch.compile they are traced into the graph.
"""
from __future__ import annotations

import torch

from .dispatch import LAZYXLA_DEVICE

aten = torch.ops.aten
_KEY = "AutocastPrivateUse1"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
_libs: list = []

_LOWER = ("_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d "
          "conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul "
          "einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot "
          "_thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell "
          "_scaled_dot_product_flash_attention scaled_dot_product_attention").split()
_FP32 = ("acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan "
         "pow.Tensor_Scalar pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm "
         "group_norm frobenius_norm.dim nuclear_norm nuclear_norm.dim cosine_similarity "
         "poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div "
         "l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss "
         "soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits "
         "dist pdist cdist renorm logsumexp upsample_nearest1d _upsample_nearest_exact1d "
         "upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d "
         "upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d "
         "upsample_bicubic2d _upsample_bicubic2d_aa").split()
_FP32_UNLESS_DTYPE = ("prod prod.dim_int softmax.int log_softmax.int cumprod cumsum "
                      "linalg_vector_norm linalg_matrix_norm linalg_matrix_norm.str_ord sum "
                      "sum.dim_IntList").split()
_PROMOTE = ("addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot "
            "scatter_add").split()


def _eligible(t) -> bool:
    return (isinstance(t, torch.Tensor) and t.is_floating_point() and t.device == LAZYXLA_DEVICE
            and t.dtype is not torch.float64)


def _cast(x, dtype):
    if _eligible(x):
        return x if x.dtype is dtype else x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _floating(x):
    if _eligible(x):
        yield x.dtype
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _floating(v)


def _lower(op):
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype("lazyxla")
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})
    return kernel


def _fp32(op):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*_cast(args, torch.float32),
                      **{k: _cast(v, torch.float32) for k, v in kwargs.items()})
    return kernel


def _fp32_unless_dtype(op):
    names = [a.name for a in op._schema.arguments]
    at = names.index("dtype")

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            given = kwargs.get("dtype", args[at] if at < len(args) else None)
            if given is None and args and _eligible(args[0]):
                if at < len(args):
                    args = args[:at] + (torch.float32,) + args[at + 1:]
                else:
                    kwargs = dict(kwargs, dtype=torch.float32)
            return op(*args, **kwargs)
    return kernel


def _promote(op):
    def kernel(*args, **kwargs):
        widest = torch.get_autocast_dtype("lazyxla")  # as CUDA: the autocast dtype takes part
        for dtype in _floating((args, list(kwargs.values()))):
            widest = torch.promote_types(widest, dtype)
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*_cast(args, widest), **{k: _cast(v, widest) for k, v in kwargs.items()})
    return kernel


def _banned(*args, **kwargs):
    raise RuntimeError(
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast.")


def _overload(name):
    packet, _, overload = name.partition(".")
    return getattr(getattr(aten, packet), overload or "default")


def install() -> None:
    if _libs:
        return
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _KEY)
    lib = torch.library.Library("aten", "IMPL")
    _libs.extend((fallthrough, lib))
    for names, policy in ((_LOWER, _lower), (_FP32, _fp32), (_FP32_UNLESS_DTYPE, _fp32_unless_dtype),
                          (_PROMOTE, _promote)):
        for name in names:
            lib.impl(name, policy(_overload(name)), _KEY)
    lib.impl("binary_cross_entropy", _banned, _KEY)
