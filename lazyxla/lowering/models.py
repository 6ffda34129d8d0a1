"""Lowerings that real models (Hugging Face transformers' generation utilities, ...) need and no
other module provides. One function per aten op, as registry.py describes."""
from __future__ import annotations

import jax.numpy as jnp

from .registry import aten, register


@register(aten.isin.Tensor_Tensor)
def isin_tensor_tensor(elements, test_elements, *, assume_unique=False, invert=False):
    # generation/utils.py calls torch.isin(input_ids, pad_token_id) to build the attention mask
    hit = jnp.isin(elements, test_elements.reshape(-1))
    return ~hit if invert else hit


@register(aten.isin.Tensor_Scalar)
def isin_tensor_scalar(elements, test_element, *, assume_unique=False, invert=False):
    hit = elements == test_element
    return ~hit if invert else hit


@register(aten.isin.Scalar_Tensor)
def isin_scalar_tensor(element, test_elements, *, assume_unique=False, invert=False):
    hit = jnp.any(test_elements == element)
    return ~hit if invert else hit
