"""Lowerings from aten ops to JAX, one module per op family, collected in `registry`."""
from .registry import LOWERINGS, VIEWS, Lowering, register, load_all  # noqa: F401
