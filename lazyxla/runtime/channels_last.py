"""Channels-last convolutions on XLA's CPU backend: a pass over a program's jaxpr.

XLA's CPU runtime computes a convolution on batch-spatial-feature (NHWC) data. PyTorch's programs
are channels-first (NCHW), so XLA puts a transpose before and after each convolution, and its
layout assignment removes few of them: in ResNet training's program, 57 transpose fusions took 50
of 219 ms. This pass evaluates the program's jaxpr keeping each value in a physical layout, a
permutation of its logical dimensions. A convolution reads any layout (through its dimension
numbers) and gives batch-spatial-feature; elementwise ops, reductions, slices, pads, reverses,
concatenations, transposes and matrix products carry layouts through; every other primitive gets
its operands in logical (row-major) layout, as the program's inputs and outputs are. Where a
convolution's result would be transposed in full to meet such an op or a large logical input,
that result stays logical instead (_Evaluation). The values are the same, op for op: only where
data sits in memory changes, and with it the order XLA's kernels may sum in.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import core

from lazyxla.envflags import flag
from lazyxla.ir.node import inverse_perm

# Primitives that apply per element to operands of one shape (or rank-0 ones): any layout works.
_ELEMENTWISE = frozenset("""
    abs acos acosh add add_any and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt ceil clamp clz
    conj convert_element_type copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor
    ge gt igamma igammac imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg
    nextafter not or polygamma population_count pow real reduce_precision rem round rsqrt select_n
    shift_left shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh xor zeta
    """.split())
_REDUCTIONS = frozenset(("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                         "reduce_or", "reduce_xor", "argmax", "argmin"))
# Calls whose body is inlined: the program is not differentiated after this pass, so a custom
# derivative's primal body is the whole of its meaning here.
_INLINED = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
            "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr"}
_RULES = {}

_CONV_OPS = frozenset(("aten.convolution.default", "aten.convolution_backward.default"))


def applies(spec) -> bool:
    """On the CPU backend, for a program with a convolution, unless LAZYXLA_CHANNELS_LAST=0."""
    if jax.default_backend() != "cpu" or not flag("LAZYXLA_CHANNELS_LAST", True):
        return False
    return any(e[0].name in _CONV_OPS for e in spec.entries[spec.n_params:])  # (lowerings' names)


def channels_last(fn, free=frozenset(), out_perms: list | None = None):
    """`fn` (a function of arrays, traced by jax.jit) computed with channels-last convolutions.
    The outputs at positions in `free` come back in the layout they were computed in (no final
    transpose: the program that reads them next takes them so); tracing fills `out_perms` with
    each output's (None: logical)."""
    def program(*args):
        closed = jax.make_jaxpr(fn)(*args)
        keep = frozenset()
        for _ in range(_ATTEMPTS):  # (a retry's discarded ops are dead code, which XLA removes)
            run = _Evaluation(keep)
            outs = run.evaluate(closed.jaxpr, closed.consts, [(a, None, _NONE) for a in args])
            if run.conflicts <= keep:
                perms = [v[1] if i in free else None for i, v in enumerate(outs)]
                if out_perms is not None:
                    out_perms[:] = perms
                return tuple(_array(v, perm) for v, perm in zip(outs, perms))
            keep |= run.conflicts
        if out_perms is not None:
            out_perms[:] = [None] * len(closed.jaxpr.outvars)
        return tuple(core.eval_jaxpr(closed.jaxpr, closed.consts, *args))  # as written
    return program


# Keeping a result logical can move its consumers' layouts and so find new conflicts; the third
# evaluation that still finds some gives up and evaluates the program as written.
_ATTEMPTS = 3


# A value is (array, perm, origins). perm None is the logical layout; else physical axis i holds
# logical axis perm[i], i.e. array == transpose(logical, perm). origins: the convolutions whose
# channels-last results it is computed from.
_NONE = frozenset()
# The origins of a logical value that costs nothing to make in any layout (a broadcast, an iota,
# a constant, elementwise ops of those): XLA folds a transpose into it.
_CHEAP = frozenset(("cheap",))  # (a distinct object: every empty frozenset is one)


def _normal(perm):
    perm = tuple(perm)
    return None if perm == tuple(range(len(perm))) else perm


def _array(value, perm):
    """The value's array in layout `perm` (None: logical)."""
    x, have, _ = value
    if have == perm:
        return x
    if have is not None:
        x = jnp.transpose(x, inverse_perm(have))
    return x if perm is None else jnp.transpose(x, perm)


class _Evaluation:
    """One evaluation of a jaxpr. A convolution whose channels-last result, or a large part of it
    (a quarter or more), meets an op that takes logical operands only (a reshape, a gather) or a
    large logical input is a conflict: XLA's layout assignment then runs the elementwise ops
    between them with strided access (a 1-d convolution, a reshaping group norm and GELU's
    training step: 2.2x as long). The program is evaluated again with those convolutions' results
    kept logical."""

    def __init__(self, keep):
        self.keep, self.conflicts, self.sizes = keep, set(), {}

    def logical(self, value):
        x, perm, origins = value
        if perm is not None:
            self.conflicts.update(o for o in origins if 4 * x.size >= self.sizes[o])
        return _array(value, None)

    def evaluate(self, jaxpr, consts, args):
        env = {}

        def read(v):
            return (v.val, None, _CHEAP) if isinstance(v, core.Literal) else env[v]
        env.update((v, (c, None, _CHEAP)) for v, c in zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name in _ELEMENTWISE:
                outs = _elementwise(self, eqn, ins)
            elif name in _INLINED and isinstance(eqn.params.get(_INLINED[name]), core.ClosedJaxpr):
                body = eqn.params[_INLINED[name]]
                outs = self.evaluate(body.jaxpr, body.consts, ins)
            else:
                outs = _RULES.get(name, _logical_rule)(self, eqn, ins)
            env.update(zip(eqn.outvars, outs))
        return [read(v) for v in jaxpr.outvars]


def _bind(eqn, args, perm, origins, **params):
    out = eqn.primitive.bind(*args, **dict(eqn.params, **params))
    if perm is None and origins is not _CHEAP:
        origins = _NONE
    return [(o, perm, origins) for o in (out if eqn.primitive.multiple_results else [out])]


def _logical_rule(ev, eqn, ins):
    return _bind(eqn, [ev.logical(v) for v in ins], None, _NONE)


def _rule(*names):
    def register(fn):
        _RULES.update(dict.fromkeys(names, fn))
        return fn
    return register


def _origins(ins):
    return frozenset().union(*(v[2] for v in ins if v[1] is not None))


def _elementwise(ev, eqn, ins):
    rank = len(eqn.outvars[0].aval.shape)
    perm = next((v[1] for v in ins if v[1] is not None), None)
    if perm is None and all(jnp.ndim(v[0]) == 0 or v[2] is _CHEAP for v in ins):
        return _bind(eqn, [v[0] for v in ins], None, _CHEAP)
    # A large logical operand that is data (a program input, a gather's result) would be
    # transposed in full: the op runs logical instead, a conflict for the channels-last operands'
    # convolutions where they are large (ResNet's backward program under torch.compile, whose
    # inputs are the saved activations: 1.03x as long channels-last without this). Cheap or small
    # ones are transposed to match; one in a third layout goes through the logical one.
    size = eqn.outvars[0].aval.size
    if perm is None or any(jnp.ndim(v[0]) not in (0, rank) or (
            v[1] is None and v[2] is not _CHEAP and 4 * jnp.size(v[0]) >= size) for v in ins):
        return _logical_rule(ev, eqn, ins)
    args = [v[0] if jnp.ndim(v[0]) == 0 or v[1] == perm else
            _array((ev.logical(v), None, _NONE), perm) for v in ins]
    return _bind(eqn, args, perm, _origins(ins))


@_rule("conv_general_dilated")
def _conv(ev, eqn, ins):
    (x, px, _), (w, pw, _) = ins
    dn = eqn.params["dimension_numbers"]
    lhs = dn.lhs_spec if px is None else tuple(px.index(d) for d in dn.lhs_spec)
    rhs = dn.rhs_spec if pw is None else tuple(pw.index(d) for d in dn.rhs_spec)
    if eqn in ev.keep:
        out_spec, perm = dn.out_spec, None
    else:  # the result: batch, spatial..., feature
        batch, feature, *spatial = dn.out_spec
        n = len(dn.out_spec)
        out_spec, perm = (0, n - 1) + tuple(range(1, n - 1)), _normal((batch, *spatial, feature))
    out = _bind(eqn, [x, w], perm, frozenset((eqn,)),
                dimension_numbers=lax.ConvDimensionNumbers(lhs, rhs, out_spec))
    ev.sizes[eqn] = out[0][0].size
    return out


@_rule("broadcast_in_dim", "iota")
def _broadcast(ev, eqn, ins):
    return _bind(eqn, [ev.logical(v) for v in ins], None, _CHEAP)


@_rule("transpose")
def _transpose(ev, eqn, ins):
    (x, had, origins), = ins
    back = inverse_perm(eqn.params["permutation"])
    perm = _normal(back[a] for a in (had or range(len(back))))
    if perm is None:  # (back to logical: as cheap as it was)
        return [(x, None, origins if origins is _CHEAP else _NONE)]
    return [(x, perm, origins if had is not None else _NONE)]  # no data moves


@_rule(*_REDUCTIONS)
def _reduce(ev, eqn, ins):
    (x, perm, origins), = ins
    if perm is None:
        return _logical_rule(ev, eqn, ins)
    axes = eqn.params["axes"]
    kept = [a for a in perm if a not in axes]
    return _bind(eqn, [x], _normal(a - sum(b < a for b in axes) for a in kept), origins,
                 axes=tuple(sorted(perm.index(a) for a in axes)))


def _per_axis(param_names):
    """A rule for a primitive whose params hold one entry per dimension of its first operand."""
    def rule(ev, eqn, ins):
        x, perm, origins = ins[0]
        if perm is None:
            return _logical_rule(ev, eqn, ins)
        params = {k: tuple(eqn.params[k][a] for a in perm) for k in param_names
                  if eqn.params.get(k) is not None}
        return _bind(eqn, [x] + [ev.logical(v) for v in ins[1:]], perm, origins, **params)
    return rule


_RULES["pad"] = _per_axis(("padding_config",))
_RULES["slice"] = _per_axis(("start_indices", "limit_indices", "strides"))


@_rule("rev")
def _rev(ev, eqn, ins):
    (x, perm, origins), = ins
    if perm is None:
        return _logical_rule(ev, eqn, ins)
    return _bind(eqn, [x], perm, origins,
                 dimensions=tuple(sorted(perm.index(d) for d in eqn.params["dimensions"])))


@_rule("concatenate")
def _concatenate(ev, eqn, ins):
    perm = next((v[1] for v in ins if v[1] is not None), None)
    if perm is None:
        return _logical_rule(ev, eqn, ins)
    args = [v[0] if v[1] == perm else _array((ev.logical(v), None, _NONE), perm) for v in ins]
    return _bind(eqn, args, perm, _origins(ins), dimension=perm.index(eqn.params["dimension"]))


@_rule("dot_general")
def _dot_general(ev, eqn, ins):
    (x, px, _), (y, py, _) = ins
    if px is None and py is None:
        return _logical_rule(ev, eqn, ins)
    at_x = (px or tuple(range(x.ndim))).index
    at_y = (py or tuple(range(y.ndim))).index
    (xc, yc), (xb, yb) = eqn.params["dimension_numbers"]
    x_free = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_free = [d for d in range(y.ndim) if d not in yc and d not in yb]
    # the result: batch dims, then each operand's free dims in the order they sit in memory
    nb, nx = len(xb), len(x_free)
    perm = (tuple(range(nb)) + tuple(nb + x_free.index(d) for d in sorted(x_free, key=at_x))
            + tuple(nb + nx + y_free.index(d) for d in sorted(y_free, key=at_y)))
    dims = ((tuple(map(at_x, xc)), tuple(map(at_y, yc))), (tuple(map(at_x, xb)), tuple(map(at_y, yb))))
    return _bind(eqn, [x, y], _normal(perm), _origins(ins), dimension_numbers=dims)
