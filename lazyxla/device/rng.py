"""The device RNG. Every random op gets its own seed, a runtime scalar parameter of the graph, drawn
from (seed, counter): a fresh dropout mask every step with no recompile, and `torch.manual_seed`
makes runs reproducible."""
from __future__ import annotations

import contextlib
import hashlib
import threading

_state = {"seed": 0, "counter": 0}
_lock = threading.Lock()  # threads that draw at once get distinct counters
# While a trace draws apart: (its thread, the state it draws from), see drawn_apart()
_apart: list = [None]
# A node (an int64 0-dim seed) that random ops take as their seed instead of drawing one: set while
# PyTorch's RNG-preserving operators run an op (see rng_prims.py)
OVERRIDE: list = [None]


_U64 = 1 << 64


def manual_seed(seed: int) -> None:
    """As eager's generators: a seed in [-2**63, 2**64), a negative one taken modulo 2**64
    (`manual_seed(-1)` is `manual_seed(2**64 - 1)`); another raises eager's error."""
    seed = int(seed)
    if not -(1 << 63) <= seed < _U64:
        raise ValueError("Overflow when unpacking long long")
    _state["seed"] = seed % _U64
    _state["counter"] = 0


def initial_seed() -> int:
    return _state["seed"]


def next_seed() -> int:
    """A 63-bit seed for the next random op, a hash of (seed, counter)."""
    state, apart = _state, _apart[0]
    if apart is not None and apart[0] == threading.get_ident():
        state = apart[1]
    with _lock:
        state["counter"] += 1
        seed, counter = state["seed"], state["counter"]
    h = hashlib.blake2b(f"{seed}:{counter}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


@contextlib.contextmanager
def drawn_apart():
    """The calling thread's random ops draw from a copy of the state meanwhile: a trace's ops (their
    seeds are fed at every replay) consume none of the device RNG, and other threads' draws go on
    as before."""
    saved = _apart[0]
    _apart[0] = (threading.get_ident(), dict(_state))
    try:
        yield
    finally:
        _apart[0] = saved


def get_state() -> tuple[int, int]:
    """(seed, counter): the seed in [0, 2**64), the count of seeds drawn since."""
    return _state["seed"], _state["counter"]


def set_state(state) -> None:
    seed, counter = int(state[0]), int(state[1])
    if not 0 <= seed < _U64 or counter < 0:
        raise ValueError(f"lazyxla: not an RNG state: seed {seed}, counter {counter}")
    _state["seed"], _state["counter"] = seed, counter


def seed_from(generator) -> int:
    """The seed of a random op called with `generator=`: drawn from that generator, which it
    advances, so a generator seeded alike gives the same values (the device RNG is not used). A
    CPU generator is taken (none can be made for lazyxla); another device's raises, as on CUDA."""
    import torch
    if generator.device.type != "cpu":
        raise RuntimeError(f"Expected a 'lazyxla' device type for generator but found "
                           f"'{generator.device.type}'")
    return int(torch.randint(0, 2 ** 63 - 1, (), generator=generator))
