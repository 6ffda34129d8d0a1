"""Output handlers: put back what XLA does not return, exactly as eager returns it.

Each FX output is one of: computed by the program (an output slot); an input returned (the same
tensor object, holding its updated value if the graph wrote it); a view of an input (a new view
of that input's buffer, so it aliases the input as in eager; made by the view ops themselves on
every call where it is a view of a view argument or at a fed number: VIEW_OF_INPUT; either
way it shares the argument's version counter, as eager's view does); one of
several outputs that share a computed buffer (made from one new tensor of it per call as eager
relates them: `y, y[1:]`, `y[1:], y[:2]`: views of y, sharing its version counter, `_base` y;
`y, y.detach()`: the second a detach of the first, one storage and version counter); a duplicate of an
earlier output (the same tensor object); another tensor of an input (`x.detach()`: a detach of
that input per call, sharing its storage and version counter); None; a number (SymInt outputs are fixed per
non-tensor-argument key), or one of the numbers the bridge feeds (input_items.py), returned as
this call's value; or device data captured by the trace. An output that is a conj/neg view gets
its lazy bits back after its recipe (`bits`, decided at extraction), as the recipes build tensors
on raw data."""
from __future__ import annotations

import math

import torch

from lazyxla.device import dispatch
from lazyxla.ir import buffer as buf
from lazyxla.ir import meta
from lazyxla.ir.node import DATA, Node, data_node
from lazyxla.jaxenv import relayout
from . import fed_numbers

SLOT, INPUT, DUP, NONE, INT, CONST, INPUT_VIEW, SHARED, FED, VIEW_OF_INPUT, INPUT_ALIAS = range(11)


class OutputHandler:
    __slots__ = ("recipe", "roots", "groups", "bases", "meta", "slots_only", "pinned",
                 "traced_views", "bits")

    def __init__(self, outputs, args, arg_of_root, input_data=frozenset()):
        """outputs: the traced FX outputs; arg_of_root: id(root Buffer) -> argument index;
        input_data: ids of the arguments' data nodes as the trace began. An output holding one
        of those (x.detach(), or y after x.copy_(y)) is the program's output of that parameter,
        read afresh each call, never a constant."""
        recipe, roots, root_slot, seen = [], [], {}, {}
        # arguments whose view must stay the one traced: an output is built from its root with the
        # traced chain (view_starts.py feeds the starts of the others' views)
        self.pinned = set()
        sharing, groups, group_of = _shared_roots(outputs, args, arg_of_root), [], {}
        # per group: its root tensor's _root_look; the groups with an output that is that tensor
        # (the base its other outputs are views or detaches of)
        bases, based = [], set()

        def slot(node):
            if id(node) not in root_slot:
                root_slot[id(node)] = len(roots)
                roots.append(node)
            return root_slot[id(node)]
        for pos, o in enumerate(outputs):
            if o is None:
                recipe.append((NONE, None))
            elif isinstance(o, (int, float, bool, torch.SymInt)) and not isinstance(o, torch.Tensor):
                k = _fed_index(o)
                recipe.append((FED, k) if k is not None else
                              (INT, int(o) if isinstance(o, torch.SymInt) else o))
            elif not isinstance(o, torch.Tensor):
                raise TypeError(f"lazyxla bridge: unsupported graph output {type(o)}")
            elif id(o) in seen:
                recipe.append((DUP, seen[id(o)]))
            else:
                seen[id(o)] = pos
                st = buf.state_of(o)
                node = st.read()
                j = next((k for k, a in enumerate(args) if a is o), None)
                alias = _whole_alias(o, st, args) if j is None and type(st) is buf.Buffer \
                    and id(st) in arg_of_root else None
                if j is not None:  # the bridge writes a mutated input before building outputs
                    recipe.append((INPUT, j))
                elif alias is not None:
                    recipe.append((INPUT_ALIAS, alias))
                elif type(st) is buf.View and id(st.root) in arg_of_root:
                    recipe.append(self._input_view(o, st, args, arg_of_root))
                elif id(st.root) in sharing:
                    rn = st.root.node
                    if id(st.root) not in group_of:
                        group_of[id(st.root)] = len(groups)
                        const = rn.op is DATA and id(rn) not in input_data
                        groups.append(((CONST, rn) if const else (SLOT, (slot(rn), rn.dtype)), st.root.layout))
                        bases.append(_root_look(rn, st.root.layout))
                    g = group_of[id(st.root)]
                    how, what = _shared_recipe(o, st, bases[g], g in based)
                    if how == _BASE:
                        based.add(g)
                    recipe.append((SHARED, (g, how, what)))
                elif node.op is DATA and id(node) not in input_data:
                    recipe.append((CONST, (relayout(node.data, node.perm, None), o.dtype,
                                           meta.dense_layout(o))))
                else:
                    recipe.append((SLOT, (slot(node), tuple(o.shape), o.dtype, meta.dense_layout(o))))
        self.recipe, self.roots, self.groups = recipe, roots, tuple(groups)
        # (a view's as_strided checks its base's storage size: a group with one gets a base with
        # a storage of its span; new_tensor's has 0 bytes)
        viewed = {v[0] for kind, v in recipe if kind == SHARED and v[1] in (_VIEW, _ALIAS)}
        self.bases = tuple((*look[:4], g in viewed) for g, look in enumerate(bases))
        # (position, conj, neg) of each output whose lazy conjugate/negative bits the recipe does
        # not give: a recipe builds its tensor on the output's raw data (a program's output, an
        # input's buffer), so an output that is a conj/neg view (`a.conj()`, `x.mH`, an in-place
        # write's new value that aot_autograd copies back) takes its bits from here, decided now.
        # A view of an argument is built from the argument, whose bits it would keep: always set.
        self.bits = tuple(
            (pos, o.is_conj(), o.is_neg())
            for pos, (o, (kind, _)) in enumerate(zip(outputs, recipe))
            if kind in (INPUT_ALIAS, INPUT_VIEW, VIEW_OF_INPUT)
            or kind in (SLOT, SHARED, CONST) and (o.is_conj() or o.is_neg()))
        # an output built from an input's buffer with the chain traced: the inputs must still be
        # the views traced (the others are made from this call's arguments)
        self.traced_views = any(kind == INPUT_VIEW for kind, _ in recipe)
        # The common case, every output computed by the program and contiguous: (slot, shape,
        # dtype) per output.
        self.slots_only = tuple(v[:3] for _, v in recipe) if not self.bits and all(
            k == SLOT and v[3] is None for k, v in recipe) else None

    def __call__(self, results, args, fed=(), perms=None):
        """fed: this call's values of the numbers the bridge feeds; perms: None, or the layout
        each result is held in (compiler.Program.out_perms)."""
        if self.slots_only is not None and perms is None:
            return [_new_tensor(_Buffer(_Node(DATA, (), None, shape, dtype, data=results[i])), shape, dtype)
                    for i, shape, dtype in self.slots_only]
        out, shared = [], [None] * len(self.groups)
        for kind, v in self.recipe:
            if kind == SLOT:
                i, shape, dtype, layout = v
                if layout is None and (perms is None or perms[i] is None):  # (inline: the common case)
                    out.append(_new_tensor(_Buffer(_Node(DATA, (), None, shape, dtype, data=results[i])),
                                           shape, dtype))
                else:
                    out.append(buf.wrap_node(data_node(results[i], dtype, perms and perms[i]), layout))
            elif kind == INPUT:
                out.append(args[v])
            elif kind == INPUT_ALIAS:
                out.append(args[v].detach())
            elif kind == DUP:
                out.append(out[v])
            elif kind == NONE:
                out.append(None)
            elif kind == INT:
                out.append(v)
            elif kind == FED:
                out.append(fed[v])
            elif kind == SHARED:
                g, how, w = v
                base_b = shared[g]
                if base_b is None:
                    base_b = self._base(g, results, perms, shared)
                base, b = base_b
                if how == _VIEW:  # (the common case first: a view of the base, as eager's)
                    chain, shape, stride, offset, span = w
                    out.append(_restrided(_as_strided(_VIEW_KEYS, base, shape, stride, offset),
                                          _View(b, chain), shape, stride, offset, span))
                elif how == _BASE:
                    out.append(base)
                elif how == _TWIN:
                    out.append(base.detach())
                elif how == _ALIAS:
                    out.append(_as_strided(_VIEW_KEYS, base, *w, 0))
                elif how == _DETACHED:
                    chain, shape, stride, offset, span = w
                    out.append(_restrided(base.detach(), _View(b, chain), shape, stride, offset, span))
                elif how == _REPLAYED:
                    out.append(_replayed(base, w, ()))
                else:  # _OWN
                    chain, shape, dtype, geometry = w
                    out.append(_tensor(b if chain is None else _View(b, chain), shape, dtype, geometry))
            elif kind == INPUT_VIEW:  # the matcher checked that the input is the view it was
                j, chain, shape, dtype, geometry = v
                a = args[j]
                state = buf.View(buf.state_of(a).root, chain)
                # (on a detach of a, which shares a's version counter: autograd then sees a change
                # of a between a forward that saved this view, a linear's weight.t(), and its
                # backward; a view to another dtype, which no aten op made, on a tensor of its own)
                out.append(buf.restrided(a.detach(), state, shape, *geometry) if a.dtype is dtype
                           else buf.new_strided_tensor(state, shape, dtype, *geometry))
            elif kind == VIEW_OF_INPUT:
                j, ops = v
                out.append(_replayed(args[j], ops, fed))
            else:
                array, dtype, layout = v
                out.append(buf.wrap_node(data_node(array, dtype), layout))
        for pos, conj, neg in self.bits:
            _set_bits(out[pos], conj, neg)
        return out

    def _base(self, g, results, perms, shared):
        """(group g's root tensor for this call, its buffer): a new buffer of the program's output
        (or of the constant), with the root's shape and strides as traced."""
        (gk, gv), layout = self.groups[g]
        b = buf.Buffer(gv if gk == CONST else data_node(results[gv[0]], gv[1], perms and perms[gv[0]]))
        b.layout = layout
        shape, dtype, stride, span, sized = self.bases[g]
        t = buf.new_strided_tensor(b, shape, dtype, stride, 0, span) \
            if sized or layout is not None else buf.new_tensor(b, shape, dtype)
        shared[g] = t, b
        return shared[g]

    def _input_view(self, o, st, args, arg_of_root):
        """The recipe of an output that is a view of an input's buffer. The rest of the chain is
        replayed on the argument whose view chain it extends, on every call (VIEW_OF_INPUT),
        where that argument is a view itself, or the rest takes fed numbers (`x[i:i + 4]` saved
        for the backward) or views another dtype: its start, storage offset and strides are then
        this call's, as eager's. Else it is built from the root with the chain traced
        (INPUT_VIEW), on a detach of the argument, so that it shares the argument's version
        counter as eager's view does; the arguments of that buffer must then stay the views
        traced (`pinned`)."""
        j, prefix = None, -1
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.device.type == "lazyxla":
                s = buf.state_of(a)
                if s.root is st.root:
                    c = s.chain if type(s) is buf.View else ()
                    if prefix < len(c) <= len(st.chain) and all(x is y for x, y in zip(c, st.chain)):
                        j, prefix = k, len(c)
        rest = st.chain[max(prefix, 0):]
        ops = _replay_ops(rest) if j is not None else None
        owner = arg_of_root[id(st.root)]
        if ops is not None and (prefix > 0 or _takes_fed(ops) or args[owner].dtype != o.dtype):
            return VIEW_OF_INPUT, (j, ops)
        if j is None or prefix > 0:
            self.pinned.update(k for k, a in enumerate(args) if isinstance(a, torch.Tensor)
                               and a.device.type == "lazyxla" and buf.state_of(a).root is st.root)
        geometry = _geometry(o) or (meta.contiguous_strides(o.shape), 0, o.numel())
        return INPUT_VIEW, (owner, st.chain, tuple(o.shape), o.dtype, geometry)


def _root_look(node, layout) -> tuple:
    """(shape, dtype, strides, span, geometry as _geometry gives it) of the tensor a computed
    root buffer was made for: contiguous, or with its layout's strides, at offset 0."""
    shape = tuple(node.shape)
    if layout is None:
        return shape, node.dtype, meta.contiguous_strides(shape), math.prod(shape), None
    span = meta.storage_span(shape, layout, 0)
    return shape, node.dtype, tuple(layout), span, (tuple(layout), 0, span)


def _shared_recipe(o, st, base, based) -> tuple:
    """(how, what) to make output `o` on each call from its group's root tensor (the base;
    `base`: its _root_look; `based`: an earlier output is the base), related as eager relates
    them: the base itself; its detach (`relu, relu.detach()`: one storage and version counter);
    a view (`y[1:]`, `y.view(3, 1)`, `y.conj()`): a view of the base, with eager's _base, version
    counter and strides, so that a write through it moves the counter autograd checks for a
    saved y; a detach of a view (that view's detach); a view to another dtype (its view ops
    replayed on the base). Else a tensor of its own on the group's buffer."""
    shape, dtype = tuple(o.shape), o.dtype
    chain = st.chain if type(st) is buf.View else None
    if chain is None:
        if (shape, dtype, _geometry(o)) == (base[0], base[1], base[4]):
            if o._is_view():  # (`y.conj()`: one storage, so a view needs no View of its own)
                return _ALIAS, (shape, tuple(o.stride()))
            return (_TWIN, None) if based else (_BASE, None)
        return _OWN, (None, shape, dtype, _geometry(o))
    stride, offset = tuple(o.stride()), o.storage_offset()
    if dtype == base[1]:
        how = _VIEW if o._is_view() else _DETACHED
        return how, (chain, shape, stride, offset, meta.storage_span(shape, stride, offset))
    ops = _replay_ops(chain)
    return (_REPLAYED, ops) if ops is not None else (_OWN, (chain, shape, dtype, _geometry(o)))


def _whole_alias(o, st, args):
    """The argument that output `o` is another tensor of (`x.detach()`, under no_grad, where no
    aot_autograd rebuilds aliases): its buffer, shape, strides, offset and dtype. Made as a
    detach of that argument on each call, which shares its storage and version counter as
    eager's does; None if no argument is."""
    geometry = (o.shape, o.stride(), o.storage_offset(), o.dtype)
    return next((k for k, a in enumerate(args) if isinstance(a, torch.Tensor)
                 and a.device.type == "lazyxla" and buf.state_of(a) is st
                 and (a.shape, a.stride(), a.storage_offset(), a.dtype) == geometry), None)


def _replay_ops(chain):
    """(aten op, its arguments after the tensor, its kwargs) per view of `chain`, each number that
    stands for a fed number as its FedNumber (while the bridge traces with stand-ins); None where
    a view is no aten op's."""
    ops, sourced = [], dispatch.SOURCED_NUMBERS or {}
    for low, attrs, *_ in chain:
        if not isinstance(low.op, torch._ops.OpOverload):
            return None
        args, kwargs = attrs
        ops.append((low.op, fed_numbers.mark(tuple(args[1:]), sourced),
                    fed_numbers.mark(tuple(kwargs), sourced)))
    return tuple(ops)


def views_of_written_inputs(outs, args, views):
    """`outs` with each output that aot_autograd rebuilds as a view of a written argument made that
    view. `views`: (output, argument, output of the argument's new value) positions. The user's
    `t = b[:k]; b[0:1].mul_(2); return t` is in aot_autograd's functional graph a view of b's new
    value (`slice(slice_scatter(b, ...), 0, 0, k)`), which it rebuilds on b from that output's
    strides and storage offset (as_strided, once k is symbolic). Eager's scatter ops keep b's
    offset; the program's new value starts at 0, so the view came back at the storage's start.
    Replayed on b, the output's chain of views from the new value gives eager's view."""
    outs = list(outs)
    for pos, j, new in views:
        o, arg, value = outs[pos], args[j], outs[new]
        if not (isinstance(o, torch.Tensor) and isinstance(value, torch.Tensor)
                and isinstance(arg, torch.Tensor) and o.device.type == arg.device.type == "lazyxla"):
            continue
        st, root = buf.state_of(o), buf.state_of(value)
        if type(st) is buf.View and st.root is root and type(root) is buf.Buffer \
                and tuple(root.node.shape) == tuple(arg.shape) and root.node.dtype == arg.dtype:
            ops = _replay_ops(st.chain)
            if ops is not None:
                outs[pos] = _set_bits(_replayed(arg, ops, ()), o.is_conj(), o.is_neg())
    return outs


def _set_bits(t, conj, neg):
    """t with exactly the lazy conjugate/negative bits given (t is a tensor of this call's own)."""
    if t.is_conj() != conj:
        torch._C._set_conj(t, conj)
    if t.is_neg() != neg:
        torch._C._set_neg(t, neg)
    return t


def _takes_fed(ops) -> bool:
    return any(fed_numbers.count(a) or fed_numbers.count(kw) for _, a, kw in ops)


def _replayed(t, ops, fed):
    """The views `ops` of t, at this call's fed numbers: eager's view, or eager's error."""
    with torch.no_grad():
        for op, args, kwargs in ops:
            t = op(t, *fed_numbers.put(args, fed), **dict(fed_numbers.put(kwargs, fed)))
    return t


def _fed_index(number):
    """The index of the fed number `number` stands for, while the bridge traces with stand-ins."""
    sourced = dispatch.SOURCED_NUMBERS
    t = type(number)
    return sourced.get((t, number)) if sourced is not None and (t is int or t is float) else None


def _shared_roots(outputs, args, arg_of_root) -> set:
    """ids of the computed root buffers that two or more distinct outputs (not inputs, not views
    of inputs) read, or one through a view whose strides or offset an output of its own would not
    have: it is then that view of the whole buffer, as eager's (`y = x * 2; return y[:, 1:]`
    starts at offset 1, with y's strides; `y[None].expand(4, -1)` has stride 0). XLA computes all
    of y for the slice all the same. A reshape or a permutation of y stays an output of its own."""
    count, seen = {}, set()
    for o in outputs:
        if isinstance(o, torch.Tensor) and id(o) not in seen and not any(a is o for a in args):
            seen.add(id(o))
            st = buf.state_of(o)
            r = id(st.root)
            if r not in arg_of_root:
                count[r] = count.get(r, 0) + (2 if type(st) is buf.View and not _own_layout(o) else 1)
    return {r for r, c in count.items() if c > 1}


def _own_layout(t) -> bool:
    """Whether an output of its own (SLOT) reports t's strides and storage offset."""
    return _plain(t) or (t.storage_offset() == 0 and meta.dense_layout(t) is not None)


def _plain(t) -> bool:
    """Contiguous at offset 0, as a new tensor is (an empty one too: `y.t()[:0]` is not)."""
    if t.storage_offset() != 0:
        return False
    return t.is_contiguous() if t.numel() else tuple(t.stride()) == meta.contiguous_strides(t.shape)


def _geometry(t):
    """(strides, storage offset, span) of a traced output that reports eager's non-contiguous
    strides or an offset (a view, or a root with a layout), to give its replays; None if plain."""
    if _plain(t):
        return None
    return tuple(t.stride()), t.storage_offset(), meta.storage_span(t.shape, t.stride(), t.storage_offset())


def _tensor(state, shape, dtype, geometry):
    if geometry is None:
        return buf.new_tensor(state, shape, dtype)
    return buf.new_strided_tensor(state, shape, dtype, *geometry)


_Node, _Buffer, _new_tensor = Node, buf.Buffer, buf.new_tensor

# How a shared group's output is made from the group's root tensor (_shared_recipe).
_VIEW, _BASE, _TWIN, _ALIAS, _DETACHED, _REPLAYED, _OWN = range(7)
# A view of the base: as_strided through autograd's view tracking and the CPU kernel alone, which
# sets the geometry on the base's storage (no lazyxla recording: 4 us, where dispatching the view
# op costs about 20), then restrided onto a storage of its own carrying its View. It keeps what
# as_strided made it: eager's _base, version counter, and the as_strided autograd replays.
_VIEW_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.ADInplaceOrView) | \
    torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_as_strided = torch.ops.aten.as_strided.default._handle.redispatch_boxed
_restrided, _View = buf.restrided, buf.View
