"""A bounded cache for what is keyed by values a long run may never repeat."""
from __future__ import annotations

_ABSENT = object()


class Generations(dict):
    """This dict holds the current generation, `old` the one before. A key found only in the old
    one moves back (`cache[key]` finds it; `get` and `in` do not look there); when the current one
    is full it becomes the old one, and the one before goes. So what a loop uses every step stays
    at one lookup, and keys that come once (`x[i]`, keyed by i, a new one every step) no longer
    pile up for the life of the process. `cache[key]` of a key in neither gives `missing`."""
    __slots__ = ("old", "limit", "missing")

    def __init__(self, limit: int, missing=None):
        super().__init__()
        self.old, self.limit, self.missing = {}, limit, missing

    def __missing__(self, key):
        value = self.old.pop(key, _ABSENT)
        if value is _ABSENT:
            return self.missing
        self.put(key, value)
        return value

    def put(self, key, value) -> None:
        if len(self) >= self.limit:
            self.old = dict(self)
            dict.clear(self)
        self[key] = value

    def clear(self) -> None:
        """Both generations."""
        dict.clear(self)
        self.old = {}

    def every_item(self) -> list:
        """(key, value) of both generations, the current one's last."""
        return list(self.old.items()) + list(self.items())
