"""Numbers in an op's arguments that stand for fed numbers (dispatch.FedNumber): marked while the
bridge traces with stand-ins, put back from each call's values (input_items.py)."""
from __future__ import annotations

from lazyxla.device.dispatch import FedNumber


def mark(v, sourced):
    """`v` with each int that stands for a fed number (`sourced`: dispatch.SourcedNumbers) as its
    FedNumber, nested lists and tuples too."""
    tv = type(v)
    if tv is int:
        k = sourced.get((int, v))
        return v if k is None else FedNumber(k)
    if tv is tuple or tv is list:
        return tv(mark(x, sourced) for x in v)
    return v


def put(v, fed):
    """`v` with each FedNumber replaced by its fed number in `fed`."""
    tv = type(v)
    if tv is FedNumber:
        return fed[v.k]
    if tv is list or tv is tuple:
        return tv(put(x, fed) for x in v)
    return v


def count(v) -> int:
    """FedNumbers in v, nested too."""
    if type(v) is FedNumber:
        return 1
    if type(v) is tuple or type(v) is list:
        return sum(count(x) for x in v)
    return 0
