"""Output handlers: put back what XLA does not return, exactly as eager returns it.

Each FX output is one of: computed by the program (an output slot), an input returned (the same
tensor object, holding its updated value if the graph wrote it), a view of an input (a new view
of that input's buffer, so it aliases the input as in eager), a duplicate of an earlier output (the
same tensor object), None, an integer (SymInt outputs are fixed per non-tensor-argument key), or
device data captured by the trace."""
from __future__ import annotations

import torch

from lazyxla.ir import buffer as buf
from lazyxla.ir.node import DATA, Node

SLOT, INPUT, DUP, NONE, INT, CONST, INPUT_VIEW = range(7)


class OutputHandler:
    __slots__ = ("recipe", "roots", "meta", "slots_only")

    def __init__(self, outputs, args, arg_of_root):
        """outputs: the traced FX outputs; arg_of_root: id(root Buffer) -> argument index."""
        recipe, roots, root_slot, seen = [], [], {}, {}
        for pos, o in enumerate(outputs):
            if o is None:
                recipe.append((NONE, None))
            elif isinstance(o, (int, float, bool, torch.SymInt)) and not isinstance(o, torch.Tensor):
                recipe.append((INT, int(o) if isinstance(o, torch.SymInt) else o))
            elif not isinstance(o, torch.Tensor):
                raise TypeError(f"lazyxla bridge: unsupported graph output {type(o)}")
            elif id(o) in seen:
                recipe.append((DUP, seen[id(o)]))
            else:
                seen[id(o)] = pos
                st = buf.state_of(o)
                node = st.read()
                j = next((k for k, a in enumerate(args) if a is o), None)
                if j is not None:  # the bridge writes a mutated input before building outputs
                    recipe.append((INPUT, j))
                elif type(st) is buf.View and id(st.root) in arg_of_root:
                    recipe.append((INPUT_VIEW, (arg_of_root[id(st.root)], st.chain, tuple(o.shape), o.dtype)))
                elif node.op is DATA:
                    recipe.append((CONST, (node.data, o.dtype)))
                else:
                    if id(node) not in root_slot:
                        root_slot[id(node)] = len(roots)
                        roots.append(node)
                    recipe.append((SLOT, (root_slot[id(node)], tuple(o.shape), o.dtype)))
        self.recipe, self.roots = recipe, roots
        # The common case, every output computed by the program: (slot, shape, dtype) per output.
        self.slots_only = tuple(v for _, v in recipe) if all(k == SLOT for k, _ in recipe) else None

    def __call__(self, results, args):
        if self.slots_only is not None:
            return [_new_tensor(_Buffer(_Node(DATA, (), None, shape, dtype, data=results[i])), shape, dtype)
                    for i, shape, dtype in self.slots_only]
        out = []
        for kind, v in self.recipe:
            if kind == SLOT:
                i, shape, dtype = v
                out.append(buf.new_tensor(buf.Buffer(_data(results[i], dtype)), shape, dtype))
            elif kind == INPUT:
                out.append(args[v])
            elif kind == DUP:
                out.append(out[v])
            elif kind == NONE:
                out.append(None)
            elif kind == INT:
                out.append(v)
            elif kind == INPUT_VIEW:  # the matcher checked that the input is the view it was
                j, chain, shape, dtype = v
                out.append(buf.new_tensor(buf.View(buf.state_of(args[j]).root, chain), shape, dtype))
            else:
                out.append(buf.wrap_node(_data(*v)))
        return out


def _data(array, dtype):
    return _Node(DATA, (), None, tuple(array.shape), dtype, data=array)


_Node, _Buffer, _new_tensor = Node, buf.Buffer, buf.new_tensor
