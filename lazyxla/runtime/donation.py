"""Donation: a program may write its outputs into the memory of inputs nobody reads again.

An in-place update (an optimizer's step on parameters and moments, `x.add_(y)`) replaces a
buffer's device data by a value of the same shape. Without donation XLA allocates the new value
beside the old, which stays alive until the run ends: the model's state is held twice at the peak
(on an accelerator, a model whose weights and optimizer state fill more than half of its memory
cannot train), and the update writes fresh memory. Donated, the old array is the output's memory.

Which inputs are donated is fixed when a graph is cut (GraphSpec.donated: the caller's buffers
that the run overwrites, where their old data is a parameter of the new value's shape and dtype),
so it is part of the program. Whether an array may really be given up is decided at each run: an
array, or the node that holds it, referenced by anything but the buffers being overwritten and
the graph itself (another buffer sharing the data, pending work outside the graph, a cached
constant, an output handed back earlier) is fed as a copy, which the program consumes instead,
and the original stays intact. Python's reference counts make that test exact: any holder we did
not count keeps the data. (A sync counts the graph's own ops that read the data as going away
with it, which holds only when it leaves nothing pending: a partial sync, a read, donates nothing.) Arrays exported to numpy or DLPack are protected by the runtime itself
(PJRT does not donate a buffer with external references: the input is copied, never corrupted).

Where: the arguments a compiled graph writes (the bridge; an optimizer's step compiled apart from
the forward and backward), and lazy mode's syncs except on the CPU backend, where XLA keeps the
donated inputs that a whole training step's other ops still read by copying them (measured,
benchmarks/donation.py: GPT training's lazy step 1.08-1.14x as long; a compiled optimizer step
takes 1.00x or less). LAZYXLA_DONATE_SYNCS=1 or 0 overrides that choice for syncs;
LAZYXLA_DONATE=0 donates nothing.
"""
from __future__ import annotations

import functools
import sys

import jax

from lazyxla import metrics
from lazyxla.envflags import flag
from lazyxla.jaxenv import x64

_refs = sys.getrefcount


def enabled() -> bool:
    """Donation of the arguments a compiled graph writes."""
    return flag("LAZYXLA_DONATE", True)


def in_syncs() -> bool:
    """Donation in lazy mode's syncs (see the module's docstring)."""
    return enabled() and flag("LAZYXLA_DONATE_SYNCS", _off_cpu())


@functools.cache
def _off_cpu() -> bool:
    return jax.default_backend() != "cpu"


def sync_candidates(buffers, roots) -> tuple[dict, dict]:
    """For a sync of `buffers` whose new values are `roots`: ({id(old data node): position in
    roots of its new value}, {id(old data node): how many of the buffers hold it as committed})."""
    position = {id(r): k for k, r in enumerate(roots)}
    donate, holders = {}, {}
    for b in buffers:
        old = b.committed
        if old is not None and old is not b.node:
            k = position.get(id(b.node))
            if k is not None:
                donate[id(old)] = k
                holders[id(old)] = holders.get(id(old), 0) + 1
    return donate, holders


# References to a donated parameter's node that a sync itself holds: the graph's parameter list,
# and getrefcount's argument and the loop's variable below. To its array: the node's `data`, the
# list of values being fed, getrefcount's argument.
_SYNC_NODE_REFS = 3
_ARRAY_REFS = 3


def guard_sync(spec, params, values, holders) -> None:
    """Before a sync runs `spec`: feed a copy in place of each donated array that anything else
    still references (see the module's docstring)."""
    uses = spec.param_uses
    for i, _ in spec.donated:
        p = params[i]
        if _refs(p) != _SYNC_NODE_REFS + uses[i] + holders.get(id(p), 0) \
                or _refs(values[i]) != _ARRAY_REFS:
            values[i] = copy(values[i])
    metrics.counter_inc("DonatedInput", len(spec.donated))


# The bridge feeds a mutated argument's data: its root buffer holds the node as `node` and as
# `committed`, plus getrefcount's argument and the variable below. (The node is not an argument
# of the function: how many references a call holds to its arguments depends on the
# interpreter's state, such as a frame-evaluation hook being installed.)
_BRIDGE_NODE_REFS = 4


def guard_argument(root, feed, i) -> None:
    """Before a compiled graph's program runs: feed[i], the data of the `root` buffer, which the
    program donates and the bridge replaces by its output, is fed as a copy if anything else
    references that data or its node."""
    node = root.node
    if _refs(node) != _BRIDGE_NODE_REFS or _refs(feed[i]) != _ARRAY_REFS:
        feed[i] = copy(feed[i])


def copy(array):
    """A fresh copy of a device array, donated in its place (counted: DonationCopy; every
    donated input, copied or not, counts as DonatedInput)."""
    metrics.counter_inc("DonationCopy")
    with x64(True):  # (64-bit arrays keep their dtype)
        return jax.device_put(array, may_alias=False)
