"""The one place lazyxla touches JAX's global state: 64-bit mode, dtype maps, host<->device transfers.

JAX truncates int64/float64 to 32 bits unless x64 is enabled, and PyTorch indices are int64.
We enable x64 only inside `x64()` so that a user who also uses JAX keeps their own defaults.
"""
from __future__ import annotations

import collections
import os
import platform
import re
import time
import warnings

import numpy as np
import ml_dtypes
import jax
import torch

from lazyxla import envflags, host_malloc

x64 = jax.enable_x64  # context manager: with x64(True): ...

# XLA's CPU compiler fuses a*b+c into one multiply-add rounded once (LLVM's FP contraction, which
# XLA turns on and no flag turns off); eager rounds after each op. So x*x - (x*x).max() leaves a
# rounding residue at the max instead of 0, and E[x*x] - E[x]**2 of a constant can dip below 0
# (its sqrt NaN where eager's is 0). On x86 the one switch is the instruction set: XLA's code
# capped at AVX (which has no FMA) rounds as eager does, but its elementwise and transcendental
# code then runs up to 2.2x as long (a transformer's inference step: benchmarks/cpu_rounding.py),
# so the cap is asked for: LAZYXLA_CPU_FMA=0.
ROUNDING_FLAG = "--xla_cpu_max_isa=AVX"
_ISAS_WITHOUT_FMA = ("SSE4_2", "AVX")


def _backend_started() -> bool:
    """Whether JAX's backend (its client, its threads) has started: XLA has read its flags then."""
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # (a JAX without it: assume not started)
        return False
    return backends_are_initialized()


def _cpu_rounding() -> str:
    """How this process's XLA CPU code rounds, for the report; with LAZYXLA_CPU_FMA=0, first adds
    ROUNDING_FLAG to XLA_FLAGS before JAX's backend starts (XLA reads the flags then)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "fused multiply-adds (no switch off on this architecture)"
    named = re.findall(r"xla_cpu_max_isa=(\S+)", flags)
    if named:  # (the last one counts, as for any XLA flag)
        if named[-1].upper() in _ISAS_WITHOUT_FMA:
            return f"each op rounded, as eager (XLA_FLAGS caps XLA's CPU code at {named[-1]})"
        return f"fused multiply-adds (XLA_FLAGS: xla_cpu_max_isa={named[-1]})"
    if envflags.flag("LAZYXLA_CPU_FMA", True):
        return "fused multiply-adds (XLA's default)"
    if _backend_started() and jax.default_backend() == "cpu":
        warnings.warn("lazyxla: LAZYXLA_CPU_FMA=0 cannot take effect: JAX's backend started "
                      "before lazyxla was imported, and XLA reads its flags as it starts. Import "
                      f"lazyxla first, or set XLA_FLAGS={ROUNDING_FLAG}", stacklevel=3)
        return "fused multiply-adds (LAZYXLA_CPU_FMA=0, but JAX's backend started before lazyxla)"
    if flags.strip() and not flags.lstrip().startswith("-"):  # XLA reads its flags from that file
        warnings.warn(f"lazyxla: LAZYXLA_CPU_FMA=0 cannot take effect: XLA_FLAGS names a file "
                      f"({flags.strip()}); add {ROUNDING_FLAG} to it", stacklevel=3)
        return "fused multiply-adds (LAZYXLA_CPU_FMA=0, but XLA_FLAGS names a file)"
    # first: XLA stops reading its flags at a word without dashes (a suite's threads=1)
    os.environ["XLA_FLAGS"] = f"{ROUNDING_FLAG} {flags}".strip()
    return "each op rounded, as eager (LAZYXLA_CPU_FMA=0: XLA's CPU code capped at AVX)"


CPU_ROUNDING = _cpu_rounding()


def _cpu_backend_expected() -> bool:
    """Whether JAX will run on the CPU, judged without starting its backend: JAX_PLATFORMS's first
    platform, or else no accelerator plugin installed (JAX takes an accelerator when it has one)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return platforms.split(",")[0].strip().lower() == "cpu"
    if _backend_started():
        return jax.default_backend() == "cpu"
    import importlib.metadata
    import importlib.util
    return (importlib.util.find_spec("jax_plugins") is None
            and not importlib.metadata.entry_points(group="jax_plugins"))


HOST_MEMORY = host_malloc.keep_freed_memory(_cpu_backend_expected())

# JAX's runtime (its threads, the PJRT client) does not survive fork: in a child forked after it
# started, a transfer or a program crashed the process (a DataLoader worker died with a segfault).
_forked_after_start = False


def _after_fork_in_child() -> None:
    global _forked_after_start
    try:
        from jax._src.xla_bridge import backends_are_initialized as started
    except ImportError:  # (a JAX without it: assume started, the safe side)
        started = lambda: True  # noqa: E731
    _forked_after_start = _forked_after_start or started()


os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_after_start() -> bool:
    return _forked_after_start


def check_not_forked() -> None:
    """Raise, instead of crashing, where JAX would run in a process forked after it started."""
    if _forked_after_start:
        raise RuntimeError(
            "lazyxla: the device cannot be used in a process forked after it started (JAX's "
            "runtime does not survive fork). Move batches to the device in the main process (as "
            "the DataLoader loop yields them), or start workers with 'spawn' "
            "(DataLoader(..., multiprocessing_context='spawn')).")

_TORCH_TO_NP = {
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.bool: np.dtype(np.bool_),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
    torch.float8_e4m3fnuz: np.dtype(ml_dtypes.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: np.dtype(ml_dtypes.float8_e5m2fnuz),
}
_NP_TO_TORCH = {v: k for k, v in _TORCH_TO_NP.items()}
# dtypes numpy does not have (ml_dtypes' are not torch.from_numpy's): moved as same-size integers
_BITS = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8,
         torch.float8_e4m3fnuz: torch.uint8, torch.float8_e5m2fnuz: torch.uint8}


def np_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return _TORCH_TO_NP[dtype]
    except KeyError:
        raise TypeError(f"lazyxla does not support dtype {dtype}") from None


def type_name(dtype: torch.dtype) -> str:
    """PyTorch's name for a dtype in its error messages (Float, Long, ...)."""
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
            torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
            torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
            torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
            torch.complex32: "ComplexHalf", torch.uint16: "UInt16", torch.uint32: "UInt32",
            torch.uint64: "UInt64", torch.float8_e4m3fn: "Float8_e4m3fn",
            torch.float8_e5m2: "Float8_e5m2", torch.float8_e4m3fnuz: "Float8_e4m3fnuz",
            torch.float8_e5m2fnuz: "Float8_e5m2fnuz"}.get(dtype, str(dtype))


def cpp_type_name(dtype: torch.dtype) -> str:
    """The C++ name some of PyTorch's messages give a dtype (caffe2::TypeMeta): long int, c10::Half."""
    return {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
            torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int",
            torch.int16: "short int", torch.int8: "signed char", torch.uint8: "unsigned char",
            torch.bool: "bool", torch.complex64: "c10::complex<float>",
            torch.complex128: "c10::complex<double>"}.get(dtype, str(dtype))


# the scalar types that have a legacy tensor class (torch.FloatTensor): eager's CPU kernels name a
# tensor's type by it; the others as CPUBoolType
LEGACY_TENSOR_TYPES = frozenset({"Float", "Double", "Half", "BFloat16", "Long", "Int", "Short",
                                 "Char", "Byte"})


def tensor_type_name(name: str) -> str:
    """The name eager's messages give a CPU tensor of scalar type `name` (type_name's Float)."""
    return f"torch.{name}Tensor" if name in LEGACY_TENSOR_TYPES else f"CPU{name}Type"


def torch_dtype(dtype) -> torch.dtype:
    return _NP_TO_TORCH[np.dtype(dtype)]


def supports_dtype(dtype: torch.dtype) -> bool:
    return dtype in _TORCH_TO_NP


def tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host copy of a CPU tensor as numpy (bfloat16 via its bit pattern)."""
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    bits = _BITS.get(t.dtype)
    if bits is not None:
        return t.view(bits).numpy().view(_TORCH_TO_NP[t.dtype]).copy()
    return t.numpy().copy()


def numpy_to_tensor(a: np.ndarray) -> torch.Tensor:
    """A CPU tensor that owns a copy of `a` (JAX host views are read-only and may alias)."""
    a = np.asarray(a)
    dtype = _NP_TO_TORCH.get(a.dtype)
    bits = _BITS.get(dtype)
    if bits is not None:
        return torch.from_numpy(np.array(a.view(_TORCH_TO_NP[bits]), copy=True)).view(dtype)
    return torch.from_numpy(np.array(a, copy=True))


def to_device(t: torch.Tensor) -> jax.Array:
    """CPU tensor -> jax array on the default JAX device. The numpy copy makes JAX the sole owner,
    so later in-place writes to `t` on the host cannot reach device data."""
    return put_array(tensor_to_numpy(t))


# Runtime scalars (an lr, a bias correction) are 0-dim arguments of their program, and the same
# values come back call after call (the betas every step, this step's bias correction once per
# parameter), so their device arrays are kept: a lookup instead of a transfer. The oldest goes
# when a new one comes: its buffer is reused (a transfer into fresh memory, with thousands kept
# and dropped at once, cost 26 us a miss instead of 9), and no call pays for dropping them all.
_SCALARS: collections.OrderedDict = collections.OrderedDict()
_SCALARS_MAX = 1024


def device_scalar(value, dtype: np.dtype):
    """`value` (a Python or numpy scalar) as a 0-dim device array of `dtype`, shared."""
    try:
        key = (dtype, value) if value else (dtype, value, str(value))  # (-0.0 == 0.0 but differs)
        arr = _SCALARS.get(key)
    except TypeError:  # unhashable (a 0-dim array): converted each time
        return put_array(np.asarray(value, dtype))
    if arr is None:
        if len(_SCALARS) >= _SCALARS_MAX:
            _SCALARS.popitem(last=False)
        arr = _SCALARS[key] = put_array(np.asarray(value, dtype))
    return arr


def clear_scalar_cache() -> None:
    """Drop the kept scalar arrays (torch.accelerator.empty_cache)."""
    _SCALARS.clear()


def relayout(array, have, want):
    """A device array that holds a value transposed by perm `have` (None: as the value), held
    transposed by `want` instead (ir/node.py: Node.perm)."""
    if have == want:
        return array
    with x64(True):  # (a transpose keeps its dtype; 64-bit ones too)
        if have is not None:
            array = jax.numpy.transpose(array, tuple(np.argsort(have).tolist()))
        return array if want is None else jax.numpy.transpose(array, want)


def put_array(a: np.ndarray) -> jax.Array:
    """A numpy array on the default device, which becomes its owner (`a` must not change after)."""
    global _target
    check_not_forked()
    if _put is None:
        with x64(True):
            return jax.device_put(a)
    if _target is None:  # (looked up when first needed: it starts JAX's runtime)
        device = jax.devices()[0]
        _target = (jax.sharding.SingleDeviceSharding(device), [device])
    with x64(True):  # (without, 64-bit values arrive truncated to 32 bits)
        return _put(_ShapedArray(a.shape, a.dtype), _target[0], [a], _target[1], True)


def _fast_putter():
    """JAX's own batched transfer (4.6 us for a scalar, against jax.device_put's 35), where this
    jaxlib has it; None sends jax.device_put."""
    try:
        from jax._src.core import ShapedArray
        from jax._src.lib import xla_client
        return xla_client.batched_device_put, ShapedArray
    except (ImportError, AttributeError):
        return None, None


_put, _ShapedArray = _fast_putter()
_target = None  # (sharding, [device]) of the default device


def to_host(a: jax.Array) -> torch.Tensor:
    check_not_forked()
    if isinstance(a, jax.Array):
        wait_ready([a])
    return numpy_to_tensor(np.asarray(a))


# XLA's CPU runtime runs a program on a worker thread and, when it ends, wakes the thread blocked
# on its results. On a 2-core VM that wake-up cost about 50 us a program (benchmarks/wait_ready.py),
# more than a small program's whole run. So on the CPU backend a wait polls first, for up to
# LAZYXLA_SPIN_WAIT_US (default 300; 0: block at once), then blocks; unless the last wait took
# longer than that: programs that long gain nothing from it (a transformer's ran 2-5% slower).
_SPIN_WAIT_US = 300
_spin_s = None
_last_wait = 0.0  # seconds the last wait took


def _spin_seconds() -> float:
    global _spin_s
    us = envflags.count("LAZYXLA_SPIN_WAIT_US", _SPIN_WAIT_US, maximum=10 ** 6)  # (at most 1 s)
    _spin_s = us * 1e-6 if jax.default_backend() == "cpu" else 0.0
    return _spin_s


def wait_ready(arrays) -> None:
    """Block until every array in `arrays` (a flat list of jax.Arrays) is computed, raising a
    failed computation's error."""
    global _last_wait
    # (an array a later program took as donated is deleted: that program waits for it)
    arrays = [a for a in arrays if not a.is_deleted()]
    spin = _spin_s if _spin_s is not None else _spin_seconds()
    if not spin:
        jax.block_until_ready(arrays)
        return
    now = time.perf_counter
    start = now()
    if _last_wait < spin:
        left = [a for a in arrays if not a.is_ready()]
        end = start + spin
        while left and now() < end:
            left = [a for a in left if not a.is_ready()]
    jax.block_until_ready(arrays)
    _last_wait = now() - start


def versions() -> tuple:
    import jaxlib
    return (jax.__version__, jaxlib.__version__, torch.__version__, jax.default_backend())
