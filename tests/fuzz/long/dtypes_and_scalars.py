"""Elementwise ops, reductions and casts on mixed dtypes against eager: tensors of any two dtypes,
0-dim tensors (on the device or the CPU) and Python scalars, broadcast against each other, with
special values (0, -0, NaN, inf, extremes of the dtype); functional, in-place and out= forms.
Compared: the error type, or the result's dtype, shape and values (and an in-place target's).
Not compared (README: limits): complex results where an input is not finite, results eager makes
complex32, and which of two errors an in-place or out= call raises where both apply."""
import math

import torch

import lazyxla
from _driver import main, outcome

D = lazyxla.device()
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]
SHAPES = [(2, 3), (3,), (1, 3), (2, 1), ()]

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2), "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "pow": torch.pow, "float_power": torch.float_power, "atan2": torch.atan2,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift, "rshift": torch.bitwise_right_shift,
    "hypot": torch.hypot, "copysign": torch.copysign, "nextafter": torch.nextafter,
    "xlogy": torch.xlogy, "heaviside": torch.heaviside, "gcd": torch.gcd, "lcm": torch.lcm,
    "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2, "true_divide": torch.true_divide,
    "isclose": torch.isclose, "dist": torch.dist,
}
TERNARY = {
    "where": lambda a, b, c: torch.where(a > 0 if not a.is_complex() else a.real > 0, b, c),
    "lerp": torch.lerp, "addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=2),
    "addcdiv": lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), "clamp": torch.clamp,
}
UNARY = ["neg", "abs", "sign", "sgn", "sqrt", "exp", "log", "sin", "reciprocal", "rsqrt",
         "sigmoid", "floor", "ceil", "round", "trunc", "frac", "bitwise_not", "logical_not",
         "square", "positive", "signbit", "isnan", "isinf", "isfinite", "nan_to_num", "exp2",
         "expm1", "log1p", "erf", "angle", "conj_physical", "tanh", "atan", "log2", "sinc",
         "deg2rad", "isposinf", "isneginf", "isreal", "fix", "i0", "logit", "erfinv"]
REDUCE = {
    "sum": lambda a: a.sum(), "sum_dim": lambda a: a.sum(-1, keepdim=True), "prod": lambda a: a.prod(),
    "mean": lambda a: a.mean(), "amax": lambda a: a.amax(-1), "amin": lambda a: a.amin(),
    "max": lambda a: a.max(), "min_dim": lambda a: a.min(-1), "argmax": lambda a: a.argmax(),
    "argmin_dim": lambda a: a.argmin(0), "cumsum": lambda a: a.cumsum(-1), "cumprod": lambda a: a.cumprod(0),
    "std": lambda a: a.std(), "var_dim": lambda a: a.var(-1), "norm": lambda a: a.norm(),
    "logsumexp": lambda a: a.logsumexp(-1), "all": lambda a: a.all(), "any_dim": lambda a: a.any(-1),
    "nansum": lambda a: a.nansum(), "count_nonzero": lambda a: a.count_nonzero(),
    "sum_f64": lambda a: a.sum(dtype=torch.float64), "cumsum_i64": lambda a: a.cumsum(-1, dtype=torch.int64),
    "mean_f32": lambda a: a.mean(dtype=torch.float32), "prod_i32": lambda a: a.prod(dtype=torch.int32),
    "aminmax": lambda a: a.aminmax(), "logcumsumexp": lambda a: a.logcumsumexp(-1),
    "nanmean": lambda a: a.nanmean(), "cummax": lambda a: a.cummax(-1),
}
INPLACE = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2",
           "bitwise_and", "bitwise_or", "lshift", "hypot", "copysign", "logical_and", "eq", "lt",
           "lerp", "addcmul", "addcdiv", "clamp", "xlogy", "float_power", "fmax", "gcd"]
_INPLACE_NAME = {"lshift": "bitwise_left_shift"}
_INT_RESULTS = {"cumsum_i64", "prod_i32"}


def _values(g, dt, shape, finite=False):
    """Random values of `dt`, with the dtype's special values mixed in (`finite`: no NaN, inf)."""
    n = math.prod(shape)
    if dt is torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dt.is_floating_point and not dt.is_complex:
        info = torch.iinfo(dt)
        pick = torch.randint(0, 10, (n,), generator=g)
        small = torch.randint(-4 if info.min < 0 else 0, 9, (n,), generator=g)
        special = torch.tensor([0, info.max, info.min, 1, -1 if info.min < 0 else 2])[
            torch.randint(0, 5, (n,), generator=g)]
        return torch.where(pick < 8, small, special).reshape(shape).to(dt)
    real = torch.float64 if dt in (torch.float64, torch.complex128) else torch.float32
    parts = []
    for _ in range(2 if dt.is_complex else 1):
        v = (torch.randn(n, generator=g, dtype=real) * 3).round(decimals=2)
        pick = torch.randint(0, 12, (n,), generator=g)
        special = torch.tensor([0.0, -0.0, math.nan, math.inf, -math.inf, 0.5], dtype=real)[
            torch.randint(0, 6, (n,), generator=g)]
        if finite:
            special = torch.nan_to_num(special, 0.25, 7.5, -7.5)
        parts.append(torch.where(pick < 9, v, special))
    if dt.is_complex:  # purely imaginary numbers too
        parts[0] = torch.where(torch.randint(0, 6, (n,), generator=g) == 0, 0.0, parts[0])
    v = torch.complex(*parts) if dt.is_complex else parts[0]
    return v.reshape(shape).to(dt)


def _operand(g, kind_roll, dt, shape, finite):
    """A tensor (mostly), a Python scalar, or a 0-dim CPU tensor: (eager value, lazyxla value)."""
    if kind_roll < 70:
        t = _values(g, dt, shape, finite)
        return t, t.to(D)
    if kind_roll < 85:  # a Python scalar of dt's kind
        v = _values(g, dt, (), finite).item()
        return v, v
    t = _values(g, dt, (), finite)
    return t, t.clone()  # a 0-dim CPU tensor mixed with device tensors


def _pick(g, seq):
    return seq[int(torch.randint(0, len(seq), (1,), generator=g))]


def _close(want, got, finite=None):
    """finite: where the inputs are all finite, given where an input is complex (elsewhere:
    README's limits)."""
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(want) == len(got) and all(
            _close(w, g, finite) for w, g in zip(want, got))
    if not isinstance(want, torch.Tensor):
        return want == got or (isinstance(want, float) and math.isnan(want) and math.isnan(got))
    if not isinstance(got, torch.Tensor) or want.shape != got.shape or want.dtype != got.dtype:
        return False
    got = got.cpu()
    if finite is not None and finite.shape == want.shape:
        # Complex arithmetic with an infinite part follows XLA's formulas, which can differ
        # from eager's (README: limits): compared where every input is finite
        want, got = want[finite], got[finite]
    elif finite is not None and not finite.all():
        return True  # a reduction over a non-finite complex input
    if want.dtype.is_complex:
        # where eager's quotient is not finite (a division by zero), lazyxla's must not be either
        bad = ~torch.isfinite(want)
        if not (~torch.isfinite(got[bad])).all():
            return False
        want, got = torch.view_as_real(want[~bad]), torch.view_as_real(got[~bad])
    if want.dtype.is_floating_point:
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(want.dtype, 2e-5)
        return torch.allclose(want, got, rtol=tol, atol=tol, equal_nan=True)
    return torch.equal(want, got)


def _finite_inputs(args):
    """Where all the inputs are finite, broadcast together, if one of them is complex; else None."""
    if not any(isinstance(a, complex) or isinstance(a, torch.Tensor) and a.is_complex()
               for a in args):
        return None
    masks = [torch.isfinite(a) if isinstance(a, torch.Tensor) else torch.tensor(math.isfinite(abs(a)))
             for a in args if isinstance(a, (torch.Tensor, float, complex))]
    try:
        return torch.stack(torch.broadcast_tensors(*masks)).all(0)
    except RuntimeError:
        return None


def _result(r):
    if isinstance(r, (tuple, list)):
        return tuple(_result(x) for x in r)
    return r.cpu() if isinstance(r, torch.Tensor) and r.device.type == "lazyxla" else r


def _same(want, got, finite):
    if want[0] != got[0]:
        return False
    if want[0] == "error":
        return want[1] == got[1]
    return _close(want[1], got[1], finite)


def _complex32(result) -> bool:
    return any(isinstance(r, torch.Tensor) and r.dtype == torch.complex32
               for r in (result if isinstance(result, tuple) else (result,)))


def case(seed):
    g = torch.Generator().manual_seed(seed)
    family = _pick(g, ["binary"] * 5 + ["ternary"] * 2 + ["unary"] * 2 + ["reduce"] * 2 + ["cast"])
    form = _pick(g, ["functional"] * 3 + ["inplace", "out"])
    if family == "binary":
        name = _pick(g, list(BINARY))
        fn, arity = BINARY[name], 2
    elif family == "ternary":
        name = _pick(g, list(TERNARY))
        fn, arity = TERNARY[name], 3
    elif family == "unary":
        name = _pick(g, UNARY)
        fn, arity = getattr(torch, name), 1
    elif family == "cast":
        name, fn, arity, form = "to", None, 1, "functional"
    else:
        name = _pick(g, list(REDUCE))
        fn, arity, form = REDUCE[name], 1, "functional"
    dts = [_pick(g, DTYPES) for _ in range(arity)]
    if _pick(g, range(3)) == 0:
        dts = [dts[0]] * arity  # often all alike, where eager computes rather than raising
    shapes = [_pick(g, SHAPES) for _ in range(arity)]
    rolls = [0] + [int(torch.randint(0, 100, (1,), generator=g)) for _ in range(arity - 1)]
    # float-to-int casts of NaN and inf are undefined in C++: x86 gives INT_MIN, XLA saturates
    finite = name in _INT_RESULTS or name == "to"
    ops = [_operand(g, r, dt, s, finite) for r, dt, s in zip(rolls, dts, shapes)]
    out_dt = _pick(g, DTYPES)
    if name == "to":
        if (dts[0].is_floating_point or dts[0].is_complex) and out_dt == torch.uint8:
            out_dt = torch.int16  # a negative float to uint8 is undefined in C++
        fn = lambda a: a.to(out_dt)  # noqa: E731
    return name, fn, form, ops, dts, shapes, out_dt


def _call(name, fn, form, args, out_dt, dev):
    if form == "functional":
        return lambda: (fn(*args),)
    if form == "inplace":
        method = getattr(args[0], _INPLACE_NAME.get(name, name) + "_", None)
        if name not in INPLACE or method is None:
            return lambda: (fn(*args),)
        return lambda: (method(*args[1:]), args[0])
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":
        return lambda: (fn(*args),)
    out = torch.empty((2, 3), dtype=out_dt, device=dev)
    return lambda: (fn(*args, out=out), out)


def run(seed):
    name, fn, form, ops, dts, shapes, out_dt = case(seed)
    eager_args = [e for e, _ in ops]
    want = outcome(lambda: _result(_call(name, fn, form, eager_args, out_dt, None)()))
    if want[0] == "ok" and _complex32(want[1]):
        return None  # lazyxla has no complex32 (README: limits)
    got = outcome(lambda: _result(_call(name, fn, form, [d for _, d in ops], out_dt, D)()))
    if _same(want, got, _finite_inputs(eager_args)):
        return None
    if got[0] == "error" and "complex32" in got[2]:
        return None  # a complex32 intermediate (half with a complex 0-dim tensor): README: limits
    if form != "functional" and want[0] == got[0] == "error" and got[1] == "NotImplementedError":
        # two errors at once: eager checks the output's shape and dtype first, lazyxla the
        # input dtype's support (both are eager's errors)
        if outcome(lambda: fn(*eager_args))[1] == "NotImplementedError":
            return None
    kinds = [type(e).__name__ if not isinstance(e, torch.Tensor) else f"{e.dtype}{tuple(e.shape)}"
             for e, _ in ops]
    return f"{name} {form} {kinds} out={out_dt}: eager {str(want)[:300]} lazyxla {str(got)[:300]}"


if __name__ == "__main__":
    raise SystemExit(main(run))
