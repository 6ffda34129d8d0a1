"""Registration of lazyxla's kernels with the PyTorch dispatcher (PrivateUse1).

Every op with a lowering gets a direct kernel (overriding PyTorch's composite kernels, which would
otherwise allocate and call the out= overload), as do its in-place and out= overloads. Ops with no
kernel reach the boxed catch-all, which decomposes or falls back to the CPU. CompositeImplicitAutograd
ops are never registered: a backend kernel there would replace their autograd formula."""
from __future__ import annotations

import torch

from lazyxla.ir import buffer as buf
from lazyxla.ir.node import data_node
from lazyxla.jaxenv import type_name
from lazyxla.lowering.registry import (LOWERINGS, VIEWS, Unsupported, functional_variant,
                                      mutated_args)
from lazyxla.lowering.views import VIEW_CHECKS
from . import dispatch, fallback, overlap, transfer
from .decompositions import DECOMPOSITIONS

aten = torch.ops.aten
_libs = []
_increment_version = torch._C._increment_version  # (takes a list of tensors)


# Composite ops that keep their own autograd formula (derivatives.yaml) under a backend kernel:
# registered, so the lowering replaces PyTorch's op-by-op composite (each step rounded)
_COMPOSITES_WITH_FORMULA = {aten.silu_backward.default, aten.mish_backward.default}


def _is_composite_implicit(op) -> bool:
    if op in _COMPOSITES_WITH_FORMULA:
        return False
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    except RuntimeError:  # an overload the dispatcher does not know by this name (hacked_twin)
        return True


def _functional_kernel(op, low):
    info = dispatch.op_info(op)
    name = op._schema.name
    if name.endswith("_like") or name.startswith("aten::new_"):
        return _made_where_asked(op, _functional_kernel_of(op, low, info))
    if op in _LU_OF_THE_INPUT:
        return _lu_as_eager_factors(_functional_kernel_of(op, low, info))
    return _functional_kernel_of(op, low, info)


_LU_OF_THE_INPUT = {aten._linalg_det.default, aten._linalg_slogdet.default}


def _lu_as_eager_factors(kernel):
    """det's and slogdet's LU and pivots, which PyTorch's derivative formulas read as eager makes
    them: the LU of A^T for a contiguous real A (det(A) = det(A^T); the lowering factors A^T),
    of A itself for any other (a view: A.t(), A[:, :3]), which the formulas tell apart by
    A.is_contiguous(). For those, the lowering is given A^T, so it factors A (their gradients
    were transposed)."""
    def run(a, *args, **kwargs):
        if a.is_contiguous() or a.is_complex():
            return kernel(a, *args, **kwargs)
        return kernel(a.mT, *args, **kwargs)
    return run


def _made_where_asked(op, kernel):
    """A `*_like` or `new_*` op dispatches here by its tensor argument; a `device=` naming another
    device (`zeros_like(x, device="cpu")`) makes the result there, as eager's composites do: the
    op on a stand-in of x's geometry on that device."""
    def made(x, *args, **kwargs):
        device = kwargs.get("device")
        if device is None or device.type == "lazyxla":
            return kernel(x, *args, **kwargs)
        stand_in = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
        return op(stand_in, *args, **kwargs)
    return made


def _functional_kernel_of(op, low, info):
    def kernel(*args, **kwargs):
        try:
            return dispatch.record(op, low, args, kwargs, info)
        except NotImplementedError:
            # No static output shape (e.g. index.Tensor with a boolean mask: its meta kernel
            # needs nonzero): run it on the CPU, as an op without a lowering would.
            return fallback.cpu_fallback(op, args, kwargs)
    return kernel


def _mutating_kernel(op):
    """In-place and out= overloads: record the functional op, write into the mutated tensors."""
    fop = functional_variant(op)
    low = LOWERINGS.get(fop) if fop is not None else None
    positions = mutated_args(op)
    arg_names = [a.name for a in op._schema.arguments]
    if low is None:
        return None
    out_names = {arg_names[i] for i in positions if op._schema.arguments[i].is_out}
    inplace = not out_names
    fdefaults = {a.name: (a.has_default_value(), repr(a.default_value) if a.has_default_value()
                          else None) for a in fop._schema.arguments}
    # (name, position, default): the dispatcher drops defaults, which the functional op may lack
    # or give another value (bernoulli_'s p); the same default is left to the functional op (an
    # `alpha=1` passed on would be one more runtime scalar for every add_)
    defaults = [(a.name, i, a.default_value) for i, a in enumerate(op._schema.arguments)
                if a.has_default_value() and a.name in fdefaults and a.name not in out_names
                and fdefaults[a.name] != (True, repr(a.default_value))]
    returns = len(op._schema.returns)
    from lazyxla.ir import meta
    _write, _converted, _state_of = dispatch.write_resizing, dispatch.converted, buf.state_of
    watch, overlap_rule = dispatch.VIEW_WATCH, overlap.rule(op)
    overlap_checked = overlap_rule is not None
    # (any overlap with an input is an error, whole buffers too: index_select(x, 0, i, out=x))
    always = overlap_checked and overlap_rule[1] == overlap.ANY
    device = dispatch.LAZYXLA_DEVICE
    info = dispatch.op_info(fop)
    # The dispatcher bumps an in-place or out= op's targets' version counters (its ADInplaceOrView
    # kernel), but has none for the _foreach_ ops: eager's foreach kernels bump them themselves,
    # so autograd sees an optimizer step between a forward and its backward. (Eager's fused
    # optimizers and AMP's unscale bump nothing.)
    bumps = op.name().startswith("aten::_foreach_")
    # an op PyTorch's Conjugate/Negative keys pass through (conj_physical_, neg_, addmm_, mm.out)
    # reaches the kernel with its target's lazy bits set, where eager's kernel writes the raw
    # storage: the result is the target's value, stored with its bits applied (any other op's
    # targets come resolved, by PyTorch's math-bit fallback)
    bits = _passes_math_bits(op)

    def kernel(*args, **kwargs):
        n = len(args)
        targets = [args[i] if i < n else kwargs[arg_names[i]] for i in positions]
        fkw = {k: v for k, v in kwargs.items() if k not in out_names} if out_names else dict(kwargs)
        for name, i, default in defaults:
            if i >= n and name not in fkw:
                fkw[name] = default
        flat_targets, kept = [], None
        unchanged = low.unchanged(kwargs) if low.unchanged is not None else ()
        for i, t in zip(positions, targets):
            xs = t if type(t) in (list, tuple) else (t,)
            for x in xs:
                if isinstance(x, torch.Tensor) and x.device != device:
                    raise dispatch.device_mismatch(x)
            if arg_names[i] in unchanged:  # its outputs are its inputs: nothing to write
                kept = (kept or set()) | set(range(len(flat_targets), len(flat_targets) + len(xs)))
            flat_targets.extend(xs)
        if overlap_checked:
            watch.roots = view_roots = []
            watch.on = True
        try:
            if inplace:  # one conversion serves both meta runs (fkw: kwargs with schema defaults)
                node, spec, _ = dispatch.record_node(fop, low, args, fkw, validate=op, info=info)
            else:  # out= overloads: validate with the out tensors, record without them
                meta.infer(op, dispatch.convert_args(op, args, kwargs)[2], args, kwargs)
                node, spec, _ = dispatch.record_node(fop, low, args, fkw, info=info)
        except Unsupported:
            return fallback.cpu_fallback(op, args, kwargs)
        finally:
            watch.on = False
        if overlap_checked and (view_roots or always):  # a view was read, or is written
            watch.roots = []
            cargs, ckw = overlap.inputs_alone(args, kwargs, positions, arg_names) if always \
                else (args, kwargs)
            overlap.check(flat_targets if kept is None else
                          [t for k, t in enumerate(flat_targets) if k not in kept],
                          cargs, ckw, None if always else view_roots, overlap_rule)
        values = dispatch.output_nodes(node, spec)
        if len(values) != len(flat_targets):
            raise RuntimeError(f"lazyxla: {op} writes {len(flat_targets)} tensors, its functional "
                               f"form {fop} returns {len(values)}")
        for k, (t, v) in enumerate(zip(flat_targets, values)):
            if kept is not None and k in kept:
                continue
            if bits:
                v = dispatch.math_bits(v, t.is_conj(), t.is_neg())
            if not inplace:
                _write(t, v)
                continue
            dtype = t.dtype
            if v.dtype is not dtype and not torch.can_cast(v.dtype, dtype):
                raise RuntimeError(f"result type {type_name(v.dtype)} can't be cast to the desired "
                                   f"output type {type_name(dtype)}")
            # in place: the meta run has checked that the result has the target's shape
            _state_of(t).write(_converted(v, t.shape, dtype))
        if bumps:
            _increment_version(flat_targets if kept is None else
                               [t for k, t in enumerate(flat_targets) if k not in kept])
        if not returns:  # _foreach_add_ and friends return nothing
            return None
        if returns == 1:  # (_amp_update_scale_ writes two tensors and returns the first)
            return targets[0]
        return tuple(targets)
    return kernel


def _passes_math_bits(op) -> bool:
    """Whether the dispatcher's Conjugate or Negative key passes `op` through (no fallback that
    resolves a conj/neg view it writes into a clone and copies the result back)."""
    has, through = (torch._C._dispatch_has_kernel_for_dispatch_key,
                    torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough)
    try:
        name = op.name()
        return any(has(name, key) and through(name, key) for key in ("Conjugate", "Negative"))
    except RuntimeError:  # an overload the dispatcher does not know by this name (hacked_twin)
        return False


def _view_kernel(op, low):
    info = dispatch.op_info(op)
    check = VIEW_CHECKS.get(op)
    if check is not None:  # (eager's checks of the input's strides, offset or bits)
        def checked(self, *args, **kwargs):
            check(self)
            return dispatch.record_view(op, low, self, args, kwargs, info)
        return checked

    def kernel(self, *args, **kwargs):
        return dispatch.record_view(op, low, self, args, kwargs, info)
    return kernel


def _inplace_view_kernel(op, low):
    """t_, transpose_, squeeze_, unsqueeze_, as_strided_: the tensor becomes its own view. `.data =`
    swaps in the view's sizes and state while keeping the Python object (PyTorch would restride the
    storage, which our zero-byte storages cannot take)."""
    def kernel(self, *args, **kwargs):
        if buf.storage_state(self.untyped_storage(), None) is None:
            # a wrapper with no lazyxla state (aot_autograd's FunctionalTensor replays a metadata
            # mutation on itself under no_dispatch): its sizes and strides alone change, as the
            # CPU's kernel changes them
            return op.redispatch(_CPU_KEYS, self, *args, **kwargs)
        self.data = dispatch.record_view(op, low, self, args, kwargs)
        return self
    return kernel


_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def catch_all(op, *args, **kwargs):
    """Ops with no direct kernel: functional form if lowered, else decomposition, else CPU."""
    if mutated_args(op):
        k = _mutating_kernel(op)
        if k is not None:
            return k(*args, **kwargs)
    else:
        low = LOWERINGS.get(op)
        if low is not None:
            return dispatch.record(op, low, args, kwargs)
        out = fallback.decompose(op, args, kwargs)
        if out is not NotImplemented:
            return out
    return fallback.cpu_fallback(op, args, kwargs)


def _variants(op):
    """In-place and out= overloads whose functional form is `op`."""
    name = op._schema.name.split("::")[1]
    out = []
    for base in (name + "_", name):
        packet = getattr(aten, base, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            cand = getattr(packet, ov)
            if cand is op or not mutated_args(cand):
                continue
            if functional_variant(cand) is op:
                out.append(cand)
    return out


_EMPTY_STRIDED = (aten.empty_strided.default, aten.new_empty_strided.default)


def _storage_of_strides(op, kernel):
    """empty_strided with strides that are not a dense layout, under which elements share memory
    (`(2, 3), (0, 1)`) or leave gaps (`(2, 3), (10, 2)`): eager's storage holds as many elements
    as the strides reach, so the tensor is that view of a buffer of that many (aliased elements,
    where a write that would give two values to one element raises eager's overlap error). The
    factory keeps dense layouts; it gave the others contiguous strides and a storage that small."""
    names = [a.name for a in op._schema.arguments]
    at_size, at_stride = names.index("size"), names.index("stride")

    def empty_strided(*args, **kwargs):
        size = args[at_size] if at_size < len(args) else kwargs["size"]
        stride = args[at_stride] if at_stride < len(args) else kwargs["stride"]
        t = kernel(*args, **kwargs)
        if t.numel() > 0 and tuple(t.stride()) != tuple(stride):
            if any(st < 0 for st in stride):  # (the meta kernel lets them through)
                raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} "
                                   f"and strides={list(stride)}")
            probe = torch.empty_strided(size, stride, dtype=t.dtype, device="meta")
            n = 1 + sum((k - 1) * st for k, st in zip(probe.shape, probe.stride()))
            with torch.no_grad():
                return t.new_empty(n).as_strided(probe.shape, probe.stride())
        return t
    return empty_strided


# aten.alias: PyTorch's own kernel makes a C++ tensor on the same storage (so on the same lazy
# state) with no Python object yet; a Python kernel's result has one, and `as_subclass` (which
# wraps an alias: torchvision's tv_tensors) refused to make it an instance of another class.
_ALIASES_LEFT_TO_PYTORCH = {aten.alias.default}


def register_all() -> None:
    lib = torch.library.Library("aten", "IMPL")
    _libs.append(lib)
    done = set()

    def impl(op, fn):
        if op in done or _is_composite_implicit(op):
            return
        done.add(op)
        lib.impl(op._schema.name.split("::")[1] + ("" if op._overloadname == "default" else "." + op._overloadname),
                 fn, "PrivateUse1")

    for op, k in transfer.KERNELS.items():
        impl(op, k)
    for op, low in VIEWS.items():
        if op in _ALIASES_LEFT_TO_PYTORCH:
            continue
        impl(op, _view_kernel(op, low))
        for v in _variants(op):
            if not any(a.is_out for a in v._schema.arguments):  # t_, squeeze_, ... (not out=)
                impl(v, _inplace_view_kernel(v, low))
    for op, low in list(LOWERINGS.items()):
        if not isinstance(op, torch._ops.OpOverload):
            continue
        k = _functional_kernel(op, low)
        impl(op, _storage_of_strides(op, k) if op in _EMPTY_STRIDED else k)
        for v in _variants(op):
            k = _mutating_kernel(v)
            if k is not None:
                impl(v, k)
    for op, fn in DECOMPOSITIONS.items():  # (a composite kernel would be chosen before the catch-all)
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeExplicitAutograd"):
            impl(op, fn)
    for (name, key), refuse in fallback.REFUSED_CONSTRUCTORS.items():
        lib.impl(name, refuse, key)
    fb = torch.library.Library("_", "IMPL")
    _libs.append(fb)
    fb.fallback(catch_all, dispatch_key="PrivateUse1")


def new_data_tensor(array, dtype):
    return buf.wrap_node(data_node(array, dtype))
