"""IR nodes. A node is an op applied to input nodes with static attributes, or a leaf.

Leaves are program parameters: device data (`DATA`), or a runtime scalar (`SCALAR`: a Python
scalar such as a learning rate, or an RNG seed) whose value is fed at execution, so that a value
that changes every step does not change the program.
"""
from __future__ import annotations

import torch

DATA = "data"
SCALAR = "scalar"


class Node:
    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "data", "rng", "key", "mark", "pos",
                 "perm", "__weakref__")

    def __init__(self, op, inputs, attrs, shape, dtype, data=None, rng=False, key=None):
        self.op = op          # Lowering (op node), DATA or SCALAR
        self.inputs = inputs  # tuple[Node, ...]
        self.attrs = attrs    # hashable static description: everything but the inputs
        # A hashable stand-in for attrs whose equality is exact (numbers tagged with their type,
        # -0.0 apart from 0.0): for a recorded op, the id of the recorder's signature (meta's
        # interned key); None: the graph key falls back to repr(attrs).
        self.key = key
        self.shape = shape    # tuple[int, ...] or None for a multi-output node
        self.dtype = dtype    # torch.dtype, or tuple of (shape, dtype) for a multi-output node
        self.data = data      # DATA: jax.Array; SCALAR: the value fed at execution
        # DATA: None, or the physical layout `data` holds: data == transpose(value, perm), with
        # `shape` the value's (a channels-last activation a program handed on as it held it)
        self.perm = None
        self.rng = rng        # SCALAR: True when the value is an RNG seed (refreshed per replay)
        self.mark = 0         # graph.cut's bookkeeping: the cut that last visited this node, and
        self.pos = 0          # the node's position in that cut's program

    @property
    def is_leaf(self) -> bool:
        return self.op is DATA or self.op is SCALAR

    def become_data(self, array, perm=None) -> None:
        """Replace a computed node by its value, so graphs that share it reuse the result."""
        self.op, self.inputs, self.attrs, self.data, self.perm = DATA, (), None, array, perm

    def __repr__(self):
        name = self.op if isinstance(self.op, str) else self.op.name
        return f"Node({name}, {self.shape}, {self.dtype})"


def data_node(array, dtype: torch.dtype, perm=None) -> Node:
    """Device data; `perm`: the array holds the value transposed so (its shape is permuted)."""
    node = Node(DATA, (), None, tuple(array.shape) if perm is None else logical_shape(array.shape, perm),
                dtype, data=array)
    node.perm = perm
    return node


def physical_shape(shape, perm) -> tuple:
    """The shape of an array that holds a value of `shape` transposed by `perm`."""
    return tuple(shape[d] for d in perm)


def logical_shape(array_shape, perm) -> tuple:
    """The value's shape of an array that holds it transposed by `perm`."""
    return physical_shape(array_shape, inverse_perm(perm))


def inverse_perm(perm) -> tuple:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


_SCALAR_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def scalar_node(value, dtype: torch.dtype | None = None, rng: bool = False) -> Node:
    """A runtime scalar parameter. Python scalars keep their kind (bool/int/float/complex) in the
    dtype, which is part of the graph key, so type promotion is fixed at compile time."""
    if dtype is None:
        dtype = _SCALAR_DTYPES[type(value)]
    return Node(SCALAR, (), None, (), dtype, data=value, rng=rng)


class Slot(str):
    """In a node's attrs template: 'the i-th input of this node goes here'. A str ('%i') so that
    the graph key's repr of a template runs in C, and stays distinct from a literal int."""
    index: int

    def __new__(cls, i: int):
        slot = _SLOTS.get(i)
        if slot is None:
            slot = _SLOTS[i] = str.__new__(cls, f"%{i}")
            slot.index = i
        return slot


_SLOTS: dict = {}
