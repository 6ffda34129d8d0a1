"""3-d convolutions on XLA's CPU backend as sums of 2-d ones.

XLA's CPU runtime has fast 2-d convolutions (YNNPACK, Eigen) but computes 3-d ones far slower:
a 32->32-channel 3x3x3 convolution over 8x32x32 at batch 4 took 85 ms forward and 223 ms for its
three gradients, against eager's 10.5 and 24; transposed ones up to 140x eager's time. A 3-d
convolution is the sum over its depth taps of 2-d convolutions: tap t reads the input's depth
slices d*stride - padding + t*dilation, which fold into the batch of a 2-d convolution with the
tap's (kh, kw) slice of the weight. So lowered, that layer took 16 and 43 ms
(`benchmarks/convolutions.py`). A tap whose 2-d kernel is 1x1 (a temporal kernel, 3x1x1) is a
matrix product. A transposed 3-d convolution is the transpose of that form w.r.t. its input
(jax.linear_transpose: 2-d transposed convolutions). Gradients are the VJPs of these forms, 2-d
convolutions too; the weight's go over batch chunks (conv_grad.py; a transposed convolution's
as the forward convolution's with input and output swapped). Float32 and float64 on the CPU
backend; 1x1x1 kernels, half precision and other backends keep XLA's 3-d convolution."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def applies(x, w, nd: int) -> bool:
    """float32 and float64 (float16/bfloat16 keep one convolution: its one rounding); a 1x1x1
    kernel keeps XLA's convolution, which computes it as fast."""
    return (nd == 3 and x.dtype in (jnp.float32, jnp.float64)
            and any(k != 1 for k in w.shape[2:]) and jax.default_backend() == "cpu")


def conv3d_by_depth_taps(x, w, stride, padding, dilation, groups, precision, acc):
    """lax.conv_general_dilated(x, w, stride, symmetric padding, rhs_dilation=dilation,
    feature_group_count=groups, preferred_element_type=acc) for NCDHW x and OIDHW w."""
    n, c, depth = x.shape[:3]
    o, kd = w.shape[0], w.shape[2]
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = stride, padding, dilation
    out_depth = (depth + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    if out_depth <= 0 or n == 0:  # nothing to sum: XLA's own convolution gives the empty shape
        return lax.conv_general_dilated(x, w, stride, [(p, p) for p in padding], rhs_dilation=dilation,
                                        feature_group_count=groups, precision=precision,
                                        preferred_element_type=acc)
    pointwise = w.shape[3:] == (1, 1) and ph == pw == 0 and groups == 1
    xp = jnp.pad(x, ((0, 0), (0, 0), (pd, pd), (0, 0), (0, 0)))
    total = None
    for t in range(kd):
        start = t * dd
        taps = lax.slice_in_dim(xp, start, start + (out_depth - 1) * sd + 1, sd, axis=2)
        planes = jnp.moveaxis(taps, 2, 1).reshape((n * out_depth, c) + x.shape[3:])
        if pointwise:  # a 1x1 tap (a temporal kernel, 3x1x1): a matrix product, and so is its
            # weight gradient (as a 1x1 convolution that took 3-8x longer: conv_grad.py)
            y = jnp.einsum("oc,nchw->nohw", w[:, :, t, 0, 0], planes[:, :, ::sh, ::sw],
                           precision=precision, preferred_element_type=acc)
        else:
            y = lax.conv_general_dilated(planes, w[:, :, t], (sh, sw), [(ph, ph), (pw, pw)],
                                         rhs_dilation=(dh, dw), feature_group_count=groups,
                                         precision=precision, preferred_element_type=acc)
        total = y if total is None else total + y
    return jnp.moveaxis(total.reshape((n, out_depth, o) + total.shape[2:]), 1, 2)


def _transposed_size(x, w, stride, padding, output_padding, dilation):
    return tuple((d - 1) * s - 2 * p + dl * (k - 1) + op + 1 for d, k, s, p, op, dl in
                 zip(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation))


def transposes_exactly(x, w, stride, padding, output_padding, dilation) -> bool:
    """Does the convolution of the transposed convolution's output size give x's size back? Not
    where the output padding reaches the stride (PyTorch allows it below the dilation): those
    keep XLA's transposed convolution."""
    size = _transposed_size(x, w, stride, padding, output_padding, dilation)
    return all((n + 2 * p - dl * (k - 1) - 1) // s + 1 == d for n, d, k, s, p, dl in
               zip(size, x.shape[2:], w.shape[2:], stride, padding, dilation))


def conv_transpose3d_by_depth_taps(x, w, stride, padding, output_padding, dilation, groups,
                                   precision):
    """PyTorch's transposed 3-d convolution (w: in x out/groups x kernel) as what it is defined to
    be, the transpose of a convolution (here conv3d_by_depth_taps, out -> in channels) w.r.t. its
    input, at the input size the output padding picks (where transposes_exactly)."""
    size = _transposed_size(x, w, stride, padding, output_padding, dilation)

    def conv(y):
        return conv3d_by_depth_taps(y, w, stride, padding, dilation, groups, precision, None)
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1] * groups) + size, x.dtype)
    return jax.linear_transpose(conv, out)(x)[0]
