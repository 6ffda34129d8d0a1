"""The sweep: OpInfo entries, their samples on the device against the CPU, and each entry's class
(the package's docstring describes the classes and modes)."""
from __future__ import annotations

import dataclasses
import os
import re
import time
import zlib

import torch

from lazyxla import envflags

NATIVE, DECOMPOSED, FALLBACK, FAIL, SKIPPED = "NATIVE", "DECOMPOSED", "FALLBACK", "FAIL", "SKIPPED"
CLASSES = (NATIVE, DECOMPOSED, FALLBACK, FAIL, SKIPPED)
_RANK = {NATIVE: 0, DECOMPOSED: 1, FALLBACK: 2, FAIL: 3}

FAST_SAMPLES = 2        # forward samples per entry in fast mode
FAST_GRAD_SAMPLES = 1   # inplace / autograd samples per entry in fast mode
FULL_DTYPES = (torch.float32, torch.int64, torch.bool, torch.bfloat16)
FAST_DTYPE_ORDER = (torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.int32,
                    torch.float64, torch.float16, torch.uint8, torch.int8, torch.int16, torch.complex64)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KNOWN_FAILURES = os.path.join(ROOT, "tests", "opinfo", "known_failures.txt")
COVERAGE_DOC = os.path.join(ROOT, "docs", "op-coverage.md")
FULL_TAG = "[full]"  # a known failure that shows only in full mode (later samples / other dtypes)

# OpInfos whose outputs are random or uninitialised: shape, dtype and sanity checks only.
RANDOM_OPS = {
    "cauchy", "exponential", "geometric", "log_normal", "normal", "normal.in_place",
    "normal.number_mean", "uniform", "bernoulli", "multinomial", "randn", "randn_like", "rand_like",
    "randint", "randint_like", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank",
    "nn.functional.multi_head_attention_forward",  # its samples use dropout_p=0.5 (training)
}

# Sample arguments that PyTorch requires on the CPU whatever the op's device: name -> positions in
# (input, *args) kept on the CPU.
CPU_ARGS = {
    "tensor_split": (1,),  # tensor_indices_or_sections must be a CPU tensor
}

# Ill-conditioned ops: looser tolerances, each with its reason. name -> (atol, rtol, reason)
TOLERANCES = {
    "linalg.det": (1e-3, 1e-3, "determinant of random matrices: products of n pivots, error grows with n"),
    "logdet": (1e-3, 1e-3, "log-determinant through an LU of an unscaled random matrix"),
    "linalg.slogdet": (1e-3, 1e-3, "log-determinant through an LU of an unscaled random matrix"),
    "linalg.cond": (1e-2, 1e-2, "condition number: ratio of extreme singular values, ill-conditioned"),
    "linalg.matrix_power": (1e-3, 1e-3, "repeated matmul amplifies float32 rounding"),
    "matrix_exp": (1e-3, 1e-3, "scaling-and-squaring amplifies float32 rounding"),
    "cumprod": (1e-4, 1e-4, "running product: float32 rounding compounds along the dim"),
    "prod": (1e-4, 1e-4, "product of many factors: float32 rounding compounds (tree vs sequential order)"),
    **{f"nn.functional.conv_transpose{d}d": (1e-4, 1.3e-6, "sums over channels and kernel taps in "
       "another order than oneDNN's (an AMD EPYC: 2.4e-5 on one of 648 elements of conv_transpose3d); "
       "PyTorch's own OpInfo allows float32 atol 1e-4 where it compares transposed convolutions "
       "across implementations") for d in (1, 2, 3)},
    "addbmm": (1.3e-4, 1.3e-4, "sum over batch and K of products, summation order differs; PyTorch's own "
               "OpInfo overrides addbmm's float32 tolerance to 1.3e-4"),
}


def _canon_eigh(out):
    """Eigenvectors are defined up to sign (a unit phase if complex): make each column's
    largest-magnitude entry real and positive."""
    if not (isinstance(out, (list, tuple)) and len(out) == 2):
        return out
    vals, vecs = out
    if not isinstance(vecs, torch.Tensor) or vecs.numel() == 0:
        return out
    idx = vecs.abs().argmax(dim=-2, keepdim=True)
    sign = torch.sgn(torch.gather(vecs, -2, idx))  # sgn: z / |z| for complex
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return [vals, vecs * sign.conj()]


# Ops whose outputs are unique only up to a convention (sign of eigenvectors): both sides are put
# in canonical form before comparing. name -> fn(host output tree) -> tree
CANONICAL = {"linalg.eigh": _canon_eigh}


def entry_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def full_mode_from_env() -> bool:
    return envflags.flag("LAZYXLA_OPINFO_FULL", False)


def fast_dtype(op):
    for d in FAST_DTYPE_ORDER:
        if op.supports_dtype(d, "cpu"):
            return d
    return None


def entry_dtypes(op, full: bool):
    if not full:
        d = fast_dtype(op)
        return [d] if d is not None else []
    ds = [d for d in FULL_DTYPES if op.supports_dtype(d, "cpu")]
    f = fast_dtype(op)
    if f is not None and f not in ds:
        ds.insert(0, f)
    return ds


def entries(full: bool, pattern: str | None = None, dtype: torch.dtype | None = None):
    """[(opinfo, dtype or None)] of a sweep; dtype None: a SKIPPED entry. `dtype`: that dtype
    only, for the ops that support it on the CPU (a sweep beside the default one, say complex64)."""
    rx = re.compile(pattern) if pattern else None
    out = []
    for op in load_op_db():
        if rx is not None and not rx.search(entry_name(op)):
            continue
        if dtype is not None:
            ds = [dtype] if op.supports_dtype(dtype, "cpu") else []
        else:
            ds = entry_dtypes(op, full)
        out += [(op, d) for d in ds] if ds else [(op, None)]
    return out


# ---------------------------------------------------------------- results

@dataclasses.dataclass
class Result:
    name: str
    dtype: str
    cls: str
    reason: str = ""
    checks: dict = dataclasses.field(default_factory=dict)  # check -> class
    fast_cls: str | None = None  # in full mode: the class the fast run would give
    fast_reason: str = ""
    samples: int = 0
    fallbacks: tuple = ()
    decomposed: tuple = ()
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.name} {self.dtype}"


class _CheckFailed(Exception):
    def __init__(self, check, index, msg, ran_before=0):
        super().__init__(msg)
        self.check, self.index, self.msg, self.ran_before = check, index, msg, ran_before

    def seen_in_fast_mode(self) -> bool:
        """Would the fast sweep (a prefix of the same samples) hit this failure too?"""
        if self.check == "forward":
            return self.index < FAST_SAMPLES
        return self.index < max(FAST_SAMPLES, FAST_GRAD_SAMPLES) and self.ran_before < FAST_GRAD_SAMPLES


def _short(e: BaseException, n: int = 160) -> str:
    s = f"{type(e).__name__}: {e}".replace("\n", " ").replace("\t", " ")
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------- tree helpers

def _is_tensor_like_seq(x):
    return isinstance(x, (list, tuple)) and not isinstance(x, torch.Size)


def _tree_map(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if _is_tensor_like_seq(x):
        return [_tree_map(v, fn) for v in x]
    if isinstance(x, dict):
        return {k: _tree_map(v, fn) for k, v in x.items()}
    return x


def _tensors(x, acc=None):
    acc = [] if acc is None else acc
    if isinstance(x, torch.Tensor):
        acc.append(x)
    elif _is_tensor_like_seq(x):
        for v in x:
            _tensors(v, acc)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, acc)
    return acc


def _host(x):
    """Materialised CPU copy of an output tree (tuples/structseqs become lists)."""
    return _tree_map(x, lambda t: t.detach().cpu() if t.device.type == "lazyxla" else t.detach())


def _to_device_sample(sample, dev, requires_grad=False, name=""):
    """A SampleInput moved to the device: tensors copied (leaves; requires_grad kept when asked),
    `device=` arguments pointing at the CPU redirected."""
    def mv(t):
        if not isinstance(t, torch.Tensor):
            return t
        d = t.detach().to(dev)
        if requires_grad and t.requires_grad:
            d.requires_grad_(True)
        return d

    def fix_dev(v):
        if isinstance(v, torch.device) and v.type == "cpu":
            return dev
        if isinstance(v, str) and v == "cpu":
            return dev
        if isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            return type(v)(fix_dev(x) for x in v) if type(v) in (list, tuple) else v
        return v

    keep = CPU_ARGS.get(name, ())
    s = sample.transform(mv)
    s.args = tuple(sample.args[i - 1] if i in keep else a for i, a in enumerate(s.args, 1))
    s.args = tuple(fix_dev(a) for a in s.args)
    s.kwargs = {k: fix_dev(v) for k, v in s.kwargs.items()}
    return s


def _cpu_sample(sample, requires_grad=False):
    """A fresh CPU copy of a sample (so an op mutating its inputs cannot affect the next run)."""
    def cp(t):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        if requires_grad and t.requires_grad:
            c.requires_grad_(True)
        return c
    return sample.transform(cp)


def _call(fn, s):
    return fn(s.input, *s.args, **s.kwargs)


# ---------------------------------------------------------------- comparisons

def _compare(name, actual, expected):
    canon = CANONICAL.get(name)
    if canon is not None:
        actual, expected = canon(actual), canon(expected)
    kw = {}
    tol = TOLERANCES.get(name)
    if tol is not None:
        kw = dict(atol=tol[0], rtol=tol[1])
    torch.testing.assert_close(actual, expected, equal_nan=True, **kw)


def _sanity_random(actual, expected):
    """Random / uninitialised outputs: same structure, shapes and dtypes; and where the CPU output
    lies in [0, 1] or is integral, so must the device output; finite where the CPU's is."""
    at, et = _tensors(actual), _tensors(expected)
    if len(at) != len(et):
        raise AssertionError(f"{len(at)} tensor outputs, expected {len(et)}")
    for a, e in zip(at, et):
        if a.shape != e.shape or a.dtype != e.dtype:
            raise AssertionError(f"output {tuple(a.shape)} {a.dtype}, expected {tuple(e.shape)} {e.dtype}")
        if a.numel() == 0 or e.dtype == torch.bool or e.is_complex():
            continue
        ef, af = e.double(), a.double()
        if torch.isfinite(ef).all() and not torch.isfinite(af).all():
            raise AssertionError("non-finite values where the CPU gives finite ones")
        if ef.min() >= 0 and ef.max() <= 1 and e.numel() >= 4 and not (af.min() >= 0 and af.max() <= 1):
            raise AssertionError(f"values outside [0, 1] (min {af.min().item()}, max {af.max().item()})")
        if e.is_floating_point() and (ef == ef.round()).all() and e.numel() >= 4 and \
                not torch.isfinite(af).logical_not().any() and not (af == af.round()).all():
            raise AssertionError("non-integral values where the CPU gives integral ones")


# ---------------------------------------------------------------- counters

def _counters():
    from lazyxla import metrics
    return metrics.snapshot()["counters"]


def _moved(before, after):
    fb, dec = set(), set()
    for k, v in after.items():
        if v > before.get(k, 0):
            if k.startswith("aten::"):
                fb.add(k[len("aten::"):])
            elif k.startswith("lazyxla::decomposed::"):
                dec.add(k[len("lazyxla::decomposed::"):])
    return fb, dec


# ---------------------------------------------------------------- the three checks

def _samples(op, dtype, requires_grad, limit):
    torch.manual_seed(zlib.crc32(f"{entry_name(op)}/{dtype}".encode()) & 0x7FFFFFFF)
    out = []
    it = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    for s in it:
        out.append(s)
        if limit is not None and len(out) >= limit:
            break
    return out


def _check_forward(op, name, samples, dev, is_random):
    ran = 0
    for i, s in enumerate(samples):
        cs = _cpu_sample(s)
        try:
            with torch.no_grad():
                expected = _host(_call(op, cs))
        except Exception:
            continue  # not a valid sample on the CPU either
        ds = _to_device_sample(s, dev, name=name)
        try:
            with torch.no_grad():
                actual = _host(_call(op, ds))
            (_sanity_random if is_random else lambda a, e: _compare(name, a, e))(actual, expected)
        except Exception as e:
            raise _CheckFailed("forward", i, f"sample {i}: {_short(e)}") from e
        ran += 1
    return ran


def _check_inplace(op, name, samples, dev, is_random, limit):
    """The in-place variant writes into its input: visible through the tensor and a view of it."""
    fn = op.inplace_variant
    if fn is None:
        return 0
    ran = 0
    for i, s in enumerate(samples):
        if limit is not None and ran >= limit:
            break
        if not isinstance(s.input, torch.Tensor) or s.broadcasts_input:
            continue
        cs = _cpu_sample(s)
        try:
            with torch.no_grad():
                out_c = _call(fn, cs)
        except Exception:
            continue  # e.g. a result dtype the input cannot hold
        expected = cs.input.detach().clone()
        ds = _to_device_sample(s, dev, name=name)
        t = ds.input
        try:
            view = t.view(-1) if t.is_contiguous() and t.dim() > 0 else t[...]
            geometry = _geometry(t)
            with torch.no_grad():
                out_d = _call(fn, ds)
            if isinstance(out_c, torch.Tensor) and out_c is cs.input and out_d is not t:
                raise AssertionError("the in-place variant did not return its input")
            if _geometry(t) != geometry:
                # an in-place view op (transpose_, as_strided_): it restrides the tensor and writes
                # no element, so a view taken before shows the storage, not the result
                if _geometry(t) != _geometry(cs.input):
                    raise AssertionError(f"geometry {_geometry(t)} != eager's {_geometry(cs.input)}")
                _compare(name, _host(t), expected)
            elif is_random:
                _sanity_random(_host(t), expected)
            else:
                _compare(name, _host(t), expected)
                got = _host(view)
                _compare(name, got.reshape(expected.shape) if got.numel() == expected.numel() else got,
                         expected)
        except Exception as e:
            raise _CheckFailed("inplace", i, f"sample {i}: {_short(e)}", ran) from e
        ran += 1
    return ran


def _geometry(t: torch.Tensor):
    return tuple(t.shape), t.stride(), t.storage_offset()


def _grad_run(op, s, complex_outputs=False):
    """Gradients of the sample's differentiable outputs (weighted by fixed cotangents) w.r.t. its
    inputs that require grad. None when the sample has nothing to differentiate. complex_outputs
    (complex sweeps): complex outputs count too, with complex cotangents v: autograd then gives the
    gradient of the real loss sum(Re(v) * Re(out) + Im(v) * Im(out)), the same on both sides."""
    ins = [t for t in _tensors([s.input, list(s.args), dict(s.kwargs)]) if t.requires_grad]
    if not ins:
        return None
    out = _call(op, s)
    out = s.output_process_fn_grad(out)
    outs = [o for o in _tensors(out)
            if o.requires_grad and (o.is_floating_point() or (complex_outputs and o.is_complex()))]
    if not outs:
        return None
    g = torch.Generator().manual_seed(1234)
    cots = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in outs]
    grads = torch.autograd.grad(outs, ins, cots, allow_unused=True)
    return [None if x is None else x.detach().cpu() for x in grads]


def _check_grad(op, name, samples, dev, limit, complex_outputs=False):
    ran = 0
    for i, s in enumerate(samples):
        if limit is not None and ran >= limit:
            break
        try:
            expected = _grad_run(op, _cpu_sample(s, requires_grad=True), complex_outputs)
        except Exception:
            continue
        if expected is None:
            continue
        try:
            actual = _grad_run(op, _to_device_sample(s, dev, requires_grad=True, name=name), complex_outputs)
            if actual is None:
                raise AssertionError("no differentiable outputs on the device")
            for a, e in zip(actual, expected):
                if (a is None) != (e is None):
                    raise AssertionError(f"gradient defined on one side only (device {a is not None})")
            _compare(name, [a for a in actual if a is not None], [e for e in expected if e is not None])
        except Exception as e:
            raise _CheckFailed("grad", i, f"sample {i}: {_short(e)}", ran) from e
        ran += 1
    return ran


# ---------------------------------------------------------------- one entry

def _classify(fb, dec):
    return FALLBACK if fb else DECOMPOSED if dec else NATIVE


def run_entry(op, dtype, full: bool, grads: bool = False) -> Result:
    """Run one entry; never raises (an op that crashes on the device is a FAIL). grads: check
    the gradients in any dtype the OpInfo lists among its CPU backward dtypes (a `--dtype
    --grad` sweep: float16, bfloat16, float64)."""
    import lazyxla
    name = entry_name(op)
    if dtype is None:
        return Result(name, "-", SKIPPED, "no dtype of this sweep is supported on the CPU")
    dev = lazyxla.device()
    is_random = name in RANDOM_OPS or op.has_nondeterministic_output
    # gradients: float32, and complex dtypes the OpInfo lists among its CPU backward dtypes
    grad = op.supports_autograd and not is_random and (
        dtype == torch.float32 or ((dtype.is_complex or grads) and dtype in op.supported_backward_dtypes("cpu")))
    fwd_limit = None if full else FAST_SAMPLES
    side_limit = None if full else FAST_GRAD_SAMPLES
    res = Result(name, dtype_name(dtype), NATIVE)
    t0 = time.perf_counter()
    fb_all, dec_all = set(), set()
    try:
        lazyxla.clear_pending_ir()
        try:
            samples = _samples(op, dtype, grad, None if full else max(FAST_SAMPLES, FAST_GRAD_SAMPLES))
        except Exception as e:
            res.cls, res.reason = SKIPPED, f"sample_inputs raised on the CPU: {_short(e)}"
            return res
        if not samples:
            res.cls, res.reason = SKIPPED, "no sample inputs"
            return res
        checks = [("forward", lambda: _check_forward(op, name, samples[:fwd_limit] if fwd_limit else samples,
                                                     dev, is_random))]
        if op.inplace_variant is not None:
            checks.append(("inplace", lambda: _check_inplace(op, name, samples, dev, is_random, side_limit)))
        if grad:
            checks.append(("grad", lambda: _check_grad(op, name, samples, dev, side_limit, dtype.is_complex)))
        failures = []
        for check, fn in checks:
            before = _counters()
            try:
                n = fn()
            except _CheckFailed as e:
                failures.append(e)
                res.checks[check] = FAIL
                continue
            except BaseException as e:  # noqa: BLE001 - a crash in the harness is the op's FAIL too
                if isinstance(e, KeyboardInterrupt):
                    raise
                failures.append(_CheckFailed(check, 0, _short(e)))
                res.checks[check] = FAIL
                continue
            finally:
                try:
                    lazyxla.clear_pending_ir()
                except Exception:
                    pass
            fb, dec = _moved(before, _counters())
            fb_all |= fb
            dec_all |= dec
            if check == "forward":
                res.samples = n
            res.checks[check] = _classify(fb, dec) if n else "-"
        if res.samples == 0 and not failures:
            res.cls, res.reason = SKIPPED, "no sample ran on the CPU"
            return res
        res.fallbacks, res.decomposed = tuple(sorted(fb_all)), tuple(sorted(dec_all))
        if failures:
            res.cls = FAIL
            res.reason = "; ".join(f"{f.check}: {f.msg}" for f in failures)
            if full:
                fast = [f for f in failures if f.seen_in_fast_mode()] if dtype == fast_dtype(op) else []
                res.fast_cls = FAIL if fast else None
                res.fast_reason = "; ".join(f"{f.check}: {f.msg}" for f in fast)
        else:
            res.cls = max((c for c in res.checks.values() if c in _RANK), key=_RANK.get, default=NATIVE)
            if res.fallbacks:
                res.reason = "fallback: " + ", ".join(res.fallbacks)
            elif res.decomposed:
                res.reason = "decomposed: " + ", ".join(res.decomposed)
        return res
    finally:
        try:
            lazyxla.clear_pending_ir()
        except Exception:
            pass
        res.seconds = time.perf_counter() - t0


def sweep(full: bool = False, pattern: str | None = None, progress=None, dtype=None, grads=False):
    results = []
    ents = entries(full, pattern, dtype)
    for i, (op, dtype) in enumerate(ents):
        r = run_entry(op, dtype, full, grads)
        results.append(r)
        if progress is not None:
            progress(i, len(ents), r)
    return results
