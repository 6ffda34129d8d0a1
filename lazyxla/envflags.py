"""lazyxla's environment variables, read one way: a value that does not parse is warned about and
the default is used, never guessed at (LAZYXLA_KEEP_TIED_WEIGHTS=false once meant "keep")."""
from __future__ import annotations

import os
import warnings

TRUE_WORDS = frozenset(("1", "true", "yes", "on"))
FALSE_WORDS = frozenset(("0", "false", "no", "off"))


def flag(name: str, default: bool) -> bool:
    """1/true/yes/on or 0/false/no/off, any case; unset or empty: `default`."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    warnings.warn(f"{name}={raw!r} is not one of 1/true/yes/on or 0/false/no/off; using "
                  f"{'1' if default else '0'}", stacklevel=2)
    return default


def count(name: str, default: int, minimum: int = 0, maximum: int = 2 ** 62) -> int:
    """An integer in [minimum, maximum]; unset or empty: `default`."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        n = int(raw)
    except ValueError:
        n = None
    if n is None or not minimum <= n <= maximum:
        warnings.warn(f"{name}={raw!r} is not an integer from {minimum} to {maximum}; using "
                      f"{default}", stacklevel=2)
        return default
    return n
