"""nn.EmbeddingBag / F.embedding_bag: sums, means or maxima of embedding rows over bags given by
offsets, with per-sample weights and a padding index, forward and backward (dense gradients).

Each index's bag is found from the offsets (bag b holds indices offsets[b] <= i < offsets[b+1]), so
the bags are segment reductions with a static number of segments. The auxiliary outputs have the
shapes of PyTorch's meta kernel (offset2bag per index, bag_size per bag, max_indices per bag and
column in max mode); an empty bag gives zeros, as on the CPU."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .registry import BAG_INDEX, BAG_OFFSETS, aten, check_index, register

_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset, padding_idx):
    """(bag of each index, number of bags, mask of the indices that count)."""
    n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if offsets.shape[0]:  # eager: the first offset is 0, none is past the input's end
        check_index(offsets[0], 1, negative=False, kind=BAG_OFFSETS)
        check_index(offsets[-1], indices.shape[0] + 1, negative=False, kind=BAG_OFFSETS)
    positions = jnp.arange(indices.shape[0])
    bag = jnp.searchsorted(offsets[:n_bags], positions, side="right") - 1
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones(indices.shape, bool)
    return bag, n_bags, keep


def _forward(weight, indices, offsets, scale_grad_by_freq=False, mode=_SUM, sparse=False,
             per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    check_index(indices, weight.shape[0], negative=False, kind=BAG_INDEX)
    bag, n_bags, keep = _bags(indices, offsets, include_last_offset, padding_idx)
    rows = weight[indices]
    counts = jax.ops.segment_sum(keep.astype(jnp.int64), bag, n_bags)
    # (meta's bag_size has one entry per offset, the last offset included)
    bag_size = jnp.pad(counts, (0, offsets.shape[0] - n_bags))
    if mode == _MAX:
        low = jnp.full_like(rows, -jnp.inf)
        masked = jnp.where(keep[:, None], rows, low)
        out = jax.ops.segment_max(masked, bag, n_bags)
        empty = (counts == 0)[:, None]
        out = jnp.where(empty, jnp.zeros_like(out), out)
        # the row each maximum came from: first index in the bag that attains it
        hit = (masked == out[bag]) & keep[:, None]
        first = jax.ops.segment_min(jnp.where(hit, jnp.arange(indices.shape[0])[:, None],
                                              indices.shape[0]), bag, n_bags)
        max_indices = jnp.where(empty, 0, indices[jnp.minimum(first, indices.shape[0] - 1)])
        return out, bag, bag_size, max_indices.astype(jnp.int64)
    # float16 / bfloat16: eager accumulates the (weighted) rows in a float32 buffer and rounds
    # once at the end
    acc = jnp.float32 if rows.dtype in (jnp.float16, jnp.bfloat16) else rows.dtype
    rows = rows.astype(acc)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None].astype(acc)
    rows = jnp.where(keep[:, None], rows, jnp.zeros_like(rows))
    out = jax.ops.segment_sum(rows, bag, n_bags)
    if mode == _MEAN:
        out = out / jnp.maximum(counts, 1)[:, None].astype(out.dtype)
    return out.astype(weight.dtype), bag, bag_size, jnp.zeros((0,), jnp.int64)


register(aten._embedding_bag.default)(_forward)
register(aten._embedding_bag_forward_only.default)(_forward)


@register(aten._embedding_bag_backward.default)
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                           num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights,
                           padding_idx=-1):
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones(indices.shape, bool)
    out = jnp.zeros((num_weights, grad.shape[1]), grad.dtype)
    if mode == _MAX:
        nonempty = (bag_size[:grad.shape[0]] > 0)[:, None]
        cols = jnp.broadcast_to(jnp.arange(grad.shape[1]), grad.shape)
        return out.at[maximum_indices, cols].add(jnp.where(nonempty, grad, jnp.zeros_like(grad)))
    g = grad[offset2bag]
    if mode == _MEAN:
        g = g / jnp.maximum(bag_size, 1)[offset2bag][:, None].astype(g.dtype)
    if per_sample_weights is not None:
        g = g * per_sample_weights[:, None].astype(g.dtype)
    if scale_grad_by_freq:
        freq = jnp.zeros((num_weights,), grad.dtype).at[indices].add(keep.astype(grad.dtype))
        g = g / jnp.maximum(freq[indices], 1)[:, None]
    return out.at[indices].add(jnp.where(keep[:, None], g, jnp.zeros_like(g)))


@register(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                              padding_idx=-1):
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones(indices.shape, bool)
    dots = jnp.sum(grad[offset2bag] * weight[indices].astype(grad.dtype), -1)
    return jnp.where(keep, dots, jnp.zeros_like(dots))
