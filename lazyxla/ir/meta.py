"""Shape and dtype inference by running the op on `meta` tensors, cached per signature.

A meta run costs ~100-200us; the cache brings an op's inference to a dict lookup. The signature
holds tensors' shapes and dtypes, non-tensor arguments' values, and only the Python type of
runtime scalars (their value cannot change a shape or dtype)."""
from __future__ import annotations

import itertools
import re
import warnings

import torch

from lazyxla.generations import Generations
from lazyxla.jaxenv import supports_dtype, tensor_type_name


# Entries per generation: a loop records a few hundred signatures; an entry holds about 1 KB, and
# one dropped while still in use costs a meta run (100-200 us) when it comes back
_GENERATION = 1 << 15
# signature -> (output spec, signature id, one tensor's spec?, eager's strides of the outputs)
_CACHE = Generations(_GENERATION)
_IDS = itertools.count()  # signature ids: never reused, so a dropped signature's id matches nothing


def stand_in(x, device: str, elements: bool = True):
    """x with tensors replaced by data-free ones of the same shape and dtype on `device` ("meta"),
    or zeros on the CPU ("cpu"), and the lazyxla device by that device. Without `elements`, CPU
    stand-ins keep only the rank (no elements; a 0-dim one is a zero)."""
    if isinstance(x, torch.Tensor):
        # lazyxla tensors, and CPU 0-dim tensors (which PyTorch mixes with any device; as meta
        # 0-dim tensors they promote the same way and pass the meta kernels' device checks)
        if device == "meta":  # with eager's strides: an op's result keeps its input's layout
            if x.is_contiguous():
                return torch.empty(x.shape, dtype=x.dtype, device="meta")
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        return torch.zeros(x.shape if elements else (0,) * x.dim(), dtype=x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(stand_in(v, device, elements) for v in x)
    if isinstance(x, torch.device) and x.type == "lazyxla":
        return torch.device(device)
    if isinstance(x, torch.Generator) and device == "meta":
        return None  # shapes need none; some meta kernels (exponential_'s) refuse one
    return x


def _to_meta(x):
    return stand_in(x, "meta")


def _run_meta(op, args, kwargs):
    try:
        return _run_meta_kernel(op, args, kwargs)
    except AssertionError as e:  # some meta kernels assert where eager's TORCH_CHECK raises
        raise RuntimeError(str(e)) from None  # (linalg.inv of a 0-dim tensor)
    except RuntimeError as e:
        if str(e).startswith(_REF_BROADCAST_ERRORS):  # (PyTorch's Python meta kernels' words)
            _raise_broadcast_error(op, args, kwargs)
        message = _eager_names(str(e))
        if message != str(e):
            raise type(e)(message) from None
        raise


def _eager_names(message: str) -> str:
    """Sizes and tensor types in a meta kernel's message as eager's CPU kernel prints them:
    [2, 3] (not torch.Size([2, 3])), torch.FloatTensor (not MetaFloatType)."""
    message = re.sub(r"torch\.Size\((\[[^\]]*\])\)", r"\1", message)
    return re.sub(r"\bMeta(\w+?)Type\{", lambda m: tensor_type_name(m[1]) + "{", message)


_REF_BROADCAST_ERRORS = ("Attempting to broadcast a dimension of length",
                         "output with shape torch.Size(")


def _raise_broadcast_error(op, args, kwargs):
    """Eager's error for tensors that do not broadcast: their shapes joined one by one in the
    order of the op's arguments (a masked_fill's mask first), as eager's TensorIterator joins
    them; an in-place op's result that the others would grow."""
    if op._schema.name.startswith("aten::_foreach_"):
        return _raise_foreach_broadcast_error(op, args)
    outs = _out_names(op)
    tensors = [a for a in _flat(args, {k: v for k, v in kwargs.items() if k not in outs})
               if isinstance(a, torch.Tensor)]
    if op._schema.name in _SECOND_JOINED_FIRST:
        tensors = tensors[1:2] + tensors[:1] + tensors[2:]
    shape: tuple = ()
    for t in tensors:
        shape = broadcast_pair(shape, tuple(t.shape))
    if _writes_self(op) and shape != tuple(args[0].shape):
        raise RuntimeError(f"output with shape {list(args[0].shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


def _raise_foreach_broadcast_error(op, args):
    """A _foreach op's error: eager runs the op per position of its lists, and names the first
    position whose tensors do not broadcast (not tensors of different positions)."""
    lists = [a for a in args if isinstance(a, (list, tuple))]
    others = [a for a in args if isinstance(a, torch.Tensor)]
    for i in range(len(lists[0]) if lists else 0):
        tensors = [xs[i] for xs in lists if i < len(xs) and isinstance(xs[i], torch.Tensor)] + others
        shape: tuple = ()
        for t in tensors:
            shape = broadcast_pair(shape, tuple(t.shape))
        if _writes_self(op) and shape != tuple(lists[0][i].shape):
            raise RuntimeError(f"output with shape {list(lists[0][i].shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")


# ops whose eager kernel joins its second tensor's shape first: masked_fill expands the mask
# against self, rsub computes other - self, threshold_backward iterates over self, then grad
_SECOND_JOINED_FIRST = frozenset({"aten::masked_fill", "aten::rsub",
                                  "aten::threshold_backward"})


def broadcast_pair(a: tuple, b: tuple) -> tuple:
    """The shape a and b broadcast to, or eager's error (dims counted from the result's front)."""
    n = max(len(a), len(b))
    out = []
    for i in range(n - 1, -1, -1):
        size_a = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
        size_b = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
        if size_a != size_b and size_a != 1 and size_b != 1:
            raise RuntimeError(f"The size of tensor a ({size_a}) must match the size of tensor b "
                               f"({size_b}) at non-singleton dimension {i}")
        out.append(size_a if size_b == 1 else size_b)
    return tuple(reversed(out))


def _run_meta_kernel(op, args, kwargs):
    fn, margs = META_KERNELS.get(op, op), _to_meta(args)
    mkw = {k: _to_meta(v) for k, v in kwargs.items()}
    if not _writes_self(op):
        return fn(*margs, **mkw)
    # Some in-place meta kernels resize self to the broadcast shape, with out='s warning
    # (clamp_ with tensor bounds); eager's in-place ops never resize: they raise.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        raw = fn(*margs, **mkw)
    for w in seen:
        if str(w.message).startswith("An output with one or more elements was resized"):
            raise RuntimeError(f"output with shape {list(args[0].shape)} doesn't match the "
                               f"broadcast shape {list(raw.shape)}")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return raw


def _writes_self(op) -> bool:
    """An in-place overload: its first argument is written (x.add_(y), not out= overloads)."""
    known = _WRITES_SELF.get(op)
    if known is None:
        a = op._schema.arguments
        info = a[0].alias_info if a else None
        known = _WRITES_SELF[op] = bool(info is not None and info.is_write and not a[0].kwarg_only
                                        and isinstance(op, torch._ops.OpOverload))
    return known


_WRITES_SELF: dict = {}


def _spec(out):
    if isinstance(out, torch.Tensor):
        if not supports_dtype(out.dtype):  # at the call, not at the read (`half * 1j`: complex32;
            # a RuntimeError: Tensor.__mul__ turns a TypeError into NotImplemented)
            raise RuntimeError(f"lazyxla does not support dtype {out.dtype}")
        return (tuple(out.shape), out.dtype)
    if isinstance(out, (list, tuple)):
        specs = tuple(_spec(o) for o in out)
        if (all(type(x) is tuple for x in specs)
                and any(not is_tensor_spec(x) for x in specs)):
            # lists among the outputs (the functional forms of the fused optimizers and of AMP's
            # unscale): one flat tuple of outputs, in order, as the in-place kernel writes them
            return tuple(y for x in specs for y in ((x,) if is_tensor_spec(x) else x))
        return specs
    return out


def infer(op, key, args, kwargs):
    """Output spec: (shape, dtype) for a tensor, a tuple of specs for several outputs."""
    return infer_keyed(op, key, args, kwargs)[0]


def infer_keyed(op, key, args, kwargs):
    """(output spec, the signature's id, whether the spec is one tensor's, layout). The id is a
    small int standing for `key` (equal keys, equal ids), so the graph cut compares a recorded
    node by one int; None when the key is unhashable. The layout: the strides eager gives the
    results where they are not contiguous, one tuple or None per tensor output (one for a single
    tensor), else None: `x.t() * 2` and `x.t().clone()` are column-major. Only dense,
    non-overlapping layouts (a permutation of the dims): a root buffer's value is its elements in
    the order of its dims, the layout only says where eager's would sit in memory."""
    try:
        hit = _CACHE[key] if key is not None else None
    except TypeError:  # an unhashable argument: infer without caching
        key, hit = None, None
    if hit is not None:
        return hit
    check = CHECKS.get(op)
    if check is not None:  # before the meta kernel, whose own checks may be cruder (a zero stride)
        check(*args, **kwargs)
    for check in SIGNATURE_CHECKS:
        check(op, args, kwargs)
    try:
        raw = _run_meta(op, args, kwargs)
        if op in OUTPUT_FIXES:
            raw = OUTPUT_FIXES[op](raw, *args, **kwargs)
        out = _spec(raw)
    except Exception:
        _check_empty_inputs(op, args, kwargs)  # eager's error where it has its own
        raise
    _check_empty_inputs(op, args, kwargs)
    out = _masked(op, args, kwargs, out)
    layout = _layouts(raw, out)
    if key is None:
        return out, None, is_tensor_spec(out), layout
    # (a spec may be None: in-place _foreach ops return nothing)
    hit = (out, next(_IDS), is_tensor_spec(out), layout)
    _CACHE.put(key, hit)
    return hit


def dense_layout(t):
    """t's strides if they are a permutation of contiguous ones other than the identity (dense,
    non-overlapping), else None. A contiguous tensor's strides too where they differ from the
    row-major ones in a size-1 dim: eager's channels-last (1, 6, 1, 1) has strides (6, 1, 6, 6)."""
    if t.dim() < 2 or torch._debug_has_internal_overlap(t) != 0:
        return None
    stride = tuple(t.stride())
    if t.is_contiguous() and stride == contiguous_strides(t.shape):
        return None
    if storage_span(t.shape, stride, 0) != t.numel():
        return None
    return stride



def _layout(t):
    if not isinstance(t, torch.Tensor) or t.storage_offset() != 0:
        return None
    return dense_layout(t)


def _layouts(raw, spec):
    if isinstance(raw, torch.Tensor):
        return _layout(raw)
    if isinstance(raw, (list, tuple)) and len(raw) == len(spec) and all(
            o is None or isinstance(o, torch.Tensor) for o in raw):
        outs = tuple(_layout(o) for o in raw)
        return outs if any(o is not None for o in outs) else None
    return None


def check_signature(op, args, kwargs) -> None:
    """SIGNATURE_CHECKS for an op that is decomposed, not lowered (it has no meta cache of its
    own): once per op, tensor dtypes and shapes, and other arguments."""
    key = (op, _signature(args), _signature(kwargs))
    try:
        if key in _CHECKED:
            return
    except TypeError:  # an unhashable argument: check every call
        key = None
    for check in SIGNATURE_CHECKS:
        check(op, args, kwargs)
    if key is not None:
        if len(_CHECKED) > _CHECKED_MAX:  # (many shapes: dynamic lengths)
            _CHECKED.clear()
        _CHECKED.add(key)


def _signature(x):
    if isinstance(x, torch.Tensor):
        return (x.dtype, tuple(x.shape))
    if isinstance(x, (list, tuple)):
        return tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, _signature(v)) for k, v in x.items())
    return x


_CHECKED: set = set()
_CHECKED_MAX = 1 << 14


# op -> fn(*args, **kwargs) raising eager's error for arguments that PyTorch's CPU kernel rejects
# but its meta kernel lets through (lazyxla/lowering/checks.py). Run once per signature, so a check
# reads only what the signature holds: shapes, dtypes and non-scalar arguments.
CHECKS: dict = {}
# fn(op, *args, **kwargs) run once per signature of every op (lowering/dtype_support.py)
SIGNATURE_CHECKS: list = []
# op -> fn(*args, **kwargs) run on every call (device/dispatch.py): checks of runtime scalar values,
# which the signature does not hold (a fill value that overflows the dtype).
VALUE_CHECKS: dict = {}
# op -> fn(meta output, *args, **kwargs) -> the output as eager's kernels give it, where the meta
# kernel's differs: its strides (a convolution of a channels-last input), its dtype (pow of bools).
OUTPUT_FIXES: dict = {}
# op -> the meta kernel to run in its place, where PyTorch's refuses what eager's CPU kernel
# computes (native_dropout of a complex tensor)
META_KERNELS: dict = {}

_SMALL = 4096
MASK_DTYPES = (torch.bool, torch.uint8)  # index tensors that select by value, not position


def _check_empty_inputs(op, args, kwargs) -> None:
    """An op on an empty tensor can fail where its meta kernel passes: a max over no elements has
    no identity. XLA would fail at sync, far from the call; instead, once per signature with an
    empty tensor argument (and only small others), run the op on zero CPU tensors of the same
    shapes and raise eager's error at the call."""
    tensors = [a for a in _flat(args, kwargs) if isinstance(a, torch.Tensor)]
    if any(t.numel() > _SMALL for t in tensors):
        return
    # an empty out= tensor is only resized, and an empty cuDNN `reserve` (batch_norm_backward's)
    # is always empty: neither is an empty input
    skip = _out_names(op) | {"reserve"}
    named = _arg_names(op)
    inputs = [a for a in _flat([a for i, a in enumerate(args) if i >= len(named) or named[i] not in skip],
                               {k: v for k, v in kwargs.items() if k not in skip})
              if isinstance(a, torch.Tensor)]
    if not any(t.numel() == 0 for t in inputs):
        return
    if any(isinstance(a, (list, tuple)) and any(isinstance(i, torch.Tensor) and i.dtype in MASK_DTYPES
                                                for i in a) for a in args):
        return  # index masks: zero stand-ins would select nothing, and misjudge the values' shape
    try:
        op(*stand_in(args, "cpu"), **{k: stand_in(v, "cpu") for k, v in kwargs.items()})
    except (RuntimeError, IndexError, ValueError) as e:
        if "not implemented for" not in str(e):  # a CPU kernel gap, not an error of the call
            raise


def _out_names(op) -> frozenset:
    try:
        return frozenset(a.name for a in op._schema.arguments if a.is_out)
    except AttributeError:  # not an OpOverload
        return frozenset()


def _arg_names(op) -> tuple:
    try:
        return tuple(a.name for a in op._schema.arguments)
    except AttributeError:
        return ()


def _flat(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


_LAYOUTS = Generations(_GENERATION, missing=False)  # (None is a layout: contiguous)


def view_layout(op, key, src, args, kwargs):
    """The strides and storage offset eager PyTorch gives the view `op(src, *args)`, from src's:
    None when they are contiguous strides at offset 0, else (stride, offset, storage elements the
    view spans). Cached per (signature, src's strides and offset).
    Strides that forbid the view (`x.t().view(-1)`) have already raised eager's error in meta
    inference, whose stand-ins carry the input's strides. Should this meta call still refuse (a
    result whose eager layout is not a dense permutation reports contiguous strides, so strides
    can differ from eager's), the view reports contiguous strides: a view eager allows must not
    fail."""
    lkey = (key, src.stride(), src.storage_offset())
    try:
        hit = _LAYOUTS[lkey] if key is not None else False
    except TypeError:
        lkey, hit = None, False
    if hit is not False:
        return hit
    m = _strided_meta(src.shape, src.stride(), src.storage_offset(), src.dtype)
    try:
        out = op(m, *_to_meta(args), **{k: _to_meta(v) for k, v in kwargs.items()})
    except RuntimeError:  # see above
        hit = None
    else:
        stride, offset = tuple(out.stride()), out.storage_offset()
        plain = offset == 0 and stride == contiguous_strides(out.shape)
        hit = None if plain else (stride, offset, storage_span(out.shape, stride, offset))
    if key is not None and lkey is not None:
        _LAYOUTS.put(lkey, hit)
    return hit


# A view op with a start rule (Lowering.offset: slice, narrow, select) at a start not seen before
# (`x[i:i + 32]` at a new i every step): (op, input shape, dtype, strides and offset, its arguments
# but the start) -> (the inference of the first start seen, its layout, that start)
_MOVED = Generations(_GENERATION)


def view_at_start(op, offset, key, src, args, kwargs, attrs):
    """(infer_keyed's result, view_layout's) for a view op with a start rule `offset` whose node
    attrs are `attrs`. A signature new only in its start reuses the inference made at another
    start: the same shape and dtype, a new signature id, the storage offset moved by the starts'
    difference times the stride of the view's dim. A meta run only for the first start."""
    hit = _CACHE[key]
    if hit is not None:
        return hit, view_layout(op, key, src, args, kwargs)
    try:
        start, rest = offset.start_of(src.shape, attrs)
        mkey = (key[0], src.shape, src.dtype, src.stride(), src.storage_offset(), rest)
        seen = _MOVED[mkey]
    except Exception:  # out of range (the meta run raises eager's error), or unhashable
        start, seen, mkey = None, None, None
    if seen is None:
        hit = infer_keyed(op, key, (src,) + tuple(args), kwargs)
        layout = view_layout(op, key, src, args, kwargs)
        if mkey is not None and (layout is not None or src.is_contiguous()):
            _MOVED.put(mkey, (hit, layout, start))  # (None from a refused meta call: not moved)
        return hit, layout
    (spec, _, one, layouts), layout, first = seen
    hit = (spec, next(_IDS), one, layouts)
    _CACHE.put(key, hit)
    shape = spec[0]
    stride, moved = (layout[0], layout[1]) if layout is not None else (contiguous_strides(shape), 0)
    moved += (start - first) * src.stride()[rest[0]]
    if moved == 0 and stride == contiguous_strides(shape):
        return hit, None
    return hit, (stride, moved, storage_span(shape, stride, moved))


def contiguous_strides(shape) -> tuple:
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(d, 1)
    return tuple(reversed(strides))


def storage_span(shape, stride, offset) -> int:
    """Storage elements a strided tensor reaches: offset + its largest element index + 1."""
    if any(n == 0 for n in shape):
        return offset
    return offset + sum((n - 1) * abs(s) for n, s in zip(shape, stride)) + 1


def _strided_meta(shape, stride, offset, dtype) -> torch.Tensor:
    return torch.empty((storage_span(shape, stride, offset),), dtype=dtype, device="meta").as_strided(
        shape, stride, offset)


def _masked(op, args, kwargs, spec):
    """Backward ops return no tensor where `output_mask` is False (eager returns None there), but
    some meta kernels (native_batch_norm_backward) report one anyway."""
    schema = getattr(op, "_schema", None)
    if schema is None or type(spec) is not tuple or is_tensor_spec(spec):
        return spec
    names = [a.name for a in schema.arguments]
    if "output_mask" not in names:
        return spec
    i = names.index("output_mask")
    mask = kwargs["output_mask"] if "output_mask" in kwargs else args[i] if i < len(args) else None
    if mask is None or len(mask) != len(spec):
        return spec
    return tuple(s if m else None for s, m in zip(spec, mask))


def is_tensor_spec(spec) -> bool:
    return type(spec) is tuple and len(spec) == 2 and isinstance(spec[1], torch.dtype)
