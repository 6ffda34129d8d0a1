"""CTC loss (F.ctc_loss / nn.CTCLoss): PyTorch's `_ctc_loss` (per-sample negative log likelihood
and the log forward variables alpha) and `_ctc_loss_backward` (gradient w.r.t. log_probs), as its
CPU kernel computes them (Graves et al. 2006, in log space).

Each sample's target is extended with blanks (blank, l1, blank, l2, ..., blank: 2*S+1 states) and
the alpha and beta recursions run as a `lax.scan` over time, batched over samples and states, so
every shape is static: lengths only mask (a time at or beyond a sample's input length leaves its
alphas unchanged, a state beyond 2*target_length stays at -inf). As on the CPU the loss is +inf
where no alignment exists (ctc_loss applies zero_infinity to the loss), and the gradient is
exp(log_probs) - sum over the states s labelled c of exp(alpha + beta + nll - log_prob) (beta
includes the emission at t), times the loss's gradient; 0 at and beyond the input length, and 0
for an infinite loss under zero_infinity. That sum is added state by state in the CPU kernel's
order: in float32 another order differs from eager by more than assert_close's tolerance, the
terms being ~|nll| in magnitude. log_alpha is -inf where the CPU kernel leaves it unwritten.

ctc_loss reads tensor lengths to the CPU and calls the `int[]` overloads, whose lengths are
constants of the program (one program per distinct lengths). With padded (N, S) targets, tensor
lengths are instead kept on the device, through the `.Tensor` overloads (see the end): runtime
values, one program for all. PyTorch has no meta kernel for those; ours sizes log_alpha by
targets' shape (eager's, by the largest target length, can be smaller).
"""
from __future__ import annotations

import jax.numpy as jnp
import torch
from jax import lax

from .registry import CTC_LENGTHS, aten, check_index, register

_NEG = -jnp.inf


def _lse(*xs):
    """log(sum(exp(xs))) elementwise, -inf when all are -inf (the CPU kernel's max trick)."""
    m = xs[0]
    for x in xs[1:]:
        m = jnp.maximum(m, x)
    m = jnp.where(m == _NEG, jnp.zeros_like(m), m)
    return jnp.log(sum(jnp.exp(x - m) for x in xs)) + m


def _shift(x, k):
    """x[..., s - k] along the last axis (k < 0: s + |k|), -inf where that falls outside."""
    w, pad = x.shape[-1], jnp.full(x.shape[:-1] + (abs(k),), _NEG, x.dtype)
    if k > 0:
        return jnp.concatenate([pad, x], -1)[..., :w]
    return jnp.concatenate([x, pad], -1)[..., -k:]


def _lengths(x):
    return jnp.asarray(x, jnp.int64).reshape(-1)


def _states(log_probs, targets, il, tl, blank, n_states):
    """The lengths (N,); per sample and state (N, n_states): the extended label, whether the state
    exists (s <= 2*tl), whether it may be entered from s-2 (its label differs from that state's);
    and the log probability of each state's label at every time (T, N, n_states)."""
    n, c = log_probs.shape[1], log_probs.shape[2]
    smax = (n_states - 1) // 2
    il, tl = _lengths(il), _lengths(tl)
    # lengths eager rejects (with index checks on; int[] lengths were checked by the meta kernel)
    check_index(il, log_probs.shape[0] + 1, negative=False, kind=CTC_LENGTHS)
    check_index(tl, targets.shape[-1] + 1, negative=False, kind=CTC_LENGTHS)
    if targets.ndim == 1:  # the lengths add up to targets'
        check_index(jnp.abs(jnp.sum(tl) - targets.shape[0]), 1, kind=CTC_LENGTHS)
    if targets.ndim == 2:
        labels = targets[:, :smax]
    else:  # concatenated: sample b's labels start after the previous samples' target lengths
        pos = (jnp.cumsum(tl) - tl)[:, None] + jnp.arange(smax)[None, :]
        labels = targets[jnp.clip(pos, 0, max(targets.shape[0] - 1, 0))]
    labels = jnp.concatenate([labels.astype(jnp.int64), jnp.full((n, 1), blank, jnp.int64)], 1)
    s = jnp.arange(n_states)
    ext = jnp.where(s % 2 == 1, labels[:, s // 2], blank)
    valid = s[None, :] <= 2 * tl[:, None]
    ext = jnp.where(valid, ext, blank)
    check_index(ext, c, negative=False)
    ext = jnp.clip(ext, 0, c - 1)  # an out-of-range label reads out of bounds on the CPU
    prev = jnp.concatenate([jnp.full((n, 2), -1, jnp.int64), ext], 1)[:, :n_states]
    skip = ext != prev  # (state s - 2's label; -1 before the first state)
    per_time = jnp.broadcast_to(ext[None], (log_probs.shape[0],) + ext.shape)
    lp = jnp.take_along_axis(log_probs, per_time, 2)
    return il, tl, ext, valid, skip, lp


def _forward(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False, *,
             _meta):
    n_states = _meta[1][0][2]
    il, tl, _, valid, skip, lp = _states(log_probs, targets, input_lengths, target_lengths, blank,
                                         n_states)
    neg = jnp.full(valid.shape, _NEG, log_probs.dtype)
    first = valid & (jnp.arange(n_states) < 2)[None, :] & (il > 0)[:, None]
    alpha0 = jnp.where(first, lp[0], neg)

    def step(alpha, x):
        lp_t, t = x
        new = _lse(alpha, _shift(alpha, 1), jnp.where(skip, _shift(alpha, 2), neg)) + lp_t
        new = jnp.where(valid, new, neg)
        live = (t < il)[:, None]
        return jnp.where(live, new, alpha), jnp.where(live, new, neg)

    steps = jnp.arange(1, log_probs.shape[0])
    last, rows = lax.scan(step, alpha0, (lp[1:], steps))
    log_alpha = jnp.concatenate([alpha0[None], rows], 0).transpose(1, 0, 2)
    end = jnp.take_along_axis(last, (2 * tl)[:, None], 1)[:, 0]
    before = jnp.take_along_axis(last, jnp.maximum(2 * tl - 1, 0)[:, None], 1)[:, 0]
    ll = jnp.where(tl == 0, end, _lse(end, before))
    empty = jnp.where(tl == 0, 0.0, jnp.inf).astype(log_probs.dtype)  # no input: no alignment
    nll = jnp.where(il == 0, empty, -ll)
    return nll, log_alpha


register(aten._ctc_loss.default, meta=True)(_forward)
register(aten._ctc_loss.Tensor, meta=True)(_forward)


def _backward(grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank,
              zero_infinity=False):
    n_states = log_alpha.shape[2]
    il, tl, ext, valid, skip, lp = _states(log_probs, targets, input_lengths, target_lengths, blank,
                                           n_states)
    neg = jnp.full(valid.shape, _NEG, log_probs.dtype)
    s = jnp.arange(n_states)[None, :]
    last_states = (s == 2 * tl[:, None]) | (s == 2 * tl[:, None] - 1)
    skip_next = jnp.concatenate([skip[:, 2:], jnp.zeros_like(skip[:, :2])], 1)  # s -> s+2

    def step(beta_next, x):
        lp_t, t = x
        rec = _lse(beta_next, _shift(beta_next, -1),
                   jnp.where(skip_next, _shift(beta_next, -2), neg))
        rec = jnp.where(valid, rec + lp_t, neg)
        start = jnp.where(last_states, lp_t, neg)  # beta at the last input time
        end = il[:, None] - 1
        beta = jnp.where(t == end, start, jnp.where(t < end, rec, neg))
        return beta, beta

    T = log_probs.shape[0]
    _, beta = lax.scan(step, neg, (lp, jnp.arange(T)), reverse=True)  # (T, N, states)
    live = jnp.arange(T)[:, None] < il[None, :]                     # (T, N)
    ab = jnp.where(live[:, :, None] & valid[None], log_alpha.transpose(1, 0, 2) + beta,
                   jnp.full_like(beta, _NEG))
    # log of the sum of exp(ab) over the states of each label, added state by state from the last
    # as the CPU kernel does (the same rounding)
    tt, nn = jnp.arange(T)[:, None], jnp.arange(ext.shape[0])[None, :]

    def collect(i, acc):
        s = n_states - 1 - i
        lab = jnp.broadcast_to(lax.dynamic_index_in_dim(ext, s, 1, keepdims=False)[None],
                               (T, ext.shape[0]))
        v = lax.dynamic_index_in_dim(ab, s, 2, keepdims=False)
        cur = acc[tt, nn, lab]
        return acc.at[tt, nn, lab].set(jnp.where(cur == _NEG, v, _lse(cur, v)))

    collected = lax.fori_loop(0, n_states, collect, jnp.full(log_probs.shape, _NEG, ab.dtype))
    nll_b, g_b = nll[None, :, None], grad[None, :, None]
    out = (jnp.exp(log_probs) - jnp.exp(collected + nll_b - log_probs)) * g_b
    keep = live[:, :, None]
    if zero_infinity:
        keep = keep & (nll_b != jnp.inf)
    return jnp.where(keep, out, jnp.zeros_like(out))


register(aten._ctc_loss_backward.default)(_backward)
register(aten._ctc_loss_backward.Tensor)(_backward)


# Meta kernels PyTorch lacks: the backward's, and the tensor-lengths forward's (whose log_alpha is
# sized by targets' shape, the lengths' values being unknown).
def _ctc_loss_tensor_meta(log_probs, targets, input_lengths, target_lengths, blank=0,
                          zero_infinity=False):
    smax = targets.shape[1] if targets.dim() == 2 else targets.shape[0]
    n, t = log_probs.shape[1], log_probs.shape[0]
    return log_probs.new_empty((n,)), log_probs.new_empty((n, t, 2 * smax + 1))


def _ctc_loss_backward_meta(grad, log_probs, *args, **kwargs):
    return log_probs.new_empty(log_probs.shape)


_META = torch.library.Library("aten", "IMPL")
_META.impl("_ctc_loss.Tensor", _ctc_loss_tensor_meta, "Meta")
_META.impl("_ctc_loss_backward", _ctc_loss_backward_meta, "Meta")
_META.impl("_ctc_loss_backward.Tensor", _ctc_loss_backward_meta, "Meta")


def _ctc_loss_lengths_on_device(log_probs, targets, input_lengths, target_lengths, blank=0,
                                reduction=1, zero_infinity=False):
    """ctc_loss with tensor lengths, as PyTorch's composite computes it but with the lengths kept
    on the device (eager's reads them to the CPU: a sync, and on lazyxla a graph per distinct
    lengths), through the `.Tensor` overloads. Concatenated targets keep eager's path: log_alpha's
    size needs the lengths' values. Registered for autograd, so the parts' formulas apply."""
    for name, t in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise RuntimeError(f"{name} must be integral")
    batched = log_probs.dim() == 3
    if batched and targets.dim() != 2:
        return aten.ctc_loss.IntList(log_probs, targets, input_lengths.reshape(-1).tolist(),
                                     target_lengths.reshape(-1).tolist(), blank, reduction,
                                     zero_infinity)
    dev = log_probs.device
    lp = log_probs if batched else log_probs.unsqueeze(1)
    tg = targets.to(dev, torch.long)
    tg = tg if tg.dim() == 2 else tg.unsqueeze(0)  # an unbatched target: one row
    il, tl = input_lengths.to(dev).reshape(-1), target_lengths.to(dev).reshape(-1)
    res = aten._ctc_loss.Tensor(lp, tg, il, tl, blank, zero_infinity)[0]
    if zero_infinity:
        res = torch.where(res == float("inf"), torch.zeros((), dtype=res.dtype, device=dev), res)
    if reduction == 1:
        return (res / tl.clamp_min(1)).mean()
    if reduction == 2:
        return res.sum()
    return res if batched else res.squeeze(0)


_META.impl("ctc_loss.Tensor", _ctc_loss_lengths_on_device, "AutogradPrivateUse1")
