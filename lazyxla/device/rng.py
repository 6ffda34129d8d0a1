"""The device RNG. Every random op gets its own seed, a runtime scalar parameter of the graph, drawn
from (seed, counter): a fresh dropout mask every step with no recompile, and `torch.manual_seed`
makes runs reproducible."""
from __future__ import annotations

import hashlib

_state = {"seed": 0, "counter": 0}
# A node (an int64 0-dim seed) that random ops take as their seed instead of drawing one: set while
# PyTorch's RNG-preserving operators run an op (see rng_prims.py)
OVERRIDE: list = [None]


def manual_seed(seed: int) -> None:
    _state["seed"] = int(seed)
    _state["counter"] = 0


def initial_seed() -> int:
    return _state["seed"]


def next_seed() -> int:
    """A 63-bit seed for the next random op, a hash of (seed, counter)."""
    _state["counter"] += 1
    h = hashlib.blake2b(f"{_state['seed']}:{_state['counter']}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


def get_state() -> tuple[int, int]:
    return _state["seed"], _state["counter"]


def set_state(state) -> None:
    _state["seed"], _state["counter"] = int(state[0]), int(state[1])


def seed_from(generator) -> int:
    """The seed of a random op called with `generator=`: drawn from that generator, which it
    advances, so a generator seeded alike gives the same values (the device RNG is not used). A
    CPU generator is taken (none can be made for lazyxla); another device's raises, as on CUDA."""
    import torch
    if generator.device.type != "cpu":
        raise RuntimeError(f"Expected a 'lazyxla' device type for generator but found "
                           f"'{generator.device.type}'")
    return int(torch.randint(0, 2 ** 63 - 1, (), generator=generator))
