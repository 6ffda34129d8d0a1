"""Lowerings that real models (Hugging Face transformers' generation utilities, ...) need and no
other module provides. One function per aten op, as registry.py describes."""
from __future__ import annotations

import jax.numpy as jnp

from .pointwise import cast, result_type
from .registry import aten, register


@register(aten.isin.Tensor_Tensor)
def isin_tensor_tensor(elements, test_elements, *, assume_unique=False, invert=False):
    # generation/utils.py calls torch.isin(input_ids, pad_token_id) to build the attention mask
    # compared in PyTorch's promoted dtype, as eager: a 0-d int64 300 against int8 elements is 44
    elements, test_elements = cast(result_type(elements, test_elements), elements, test_elements)
    hit = jnp.isin(elements, test_elements.reshape(-1))
    return ~hit if invert else hit


@register(aten.isin.Tensor_Scalar)
def isin_tensor_scalar(elements, test_element, *, assume_unique=False, invert=False):
    elements, test_element = cast(result_type(elements, test_element), elements, test_element)
    hit = elements == test_element
    return ~hit if invert else hit


@register(aten.isin.Scalar_Tensor)
def isin_scalar_tensor(element, test_elements, *, assume_unique=False, invert=False):
    element, test_elements = cast(result_type(element, test_elements), element, test_elements)
    hit = jnp.any(test_elements == element)
    return ~hit if invert else hit
