"""The lazy IR: nodes, the buffers that tensors' storages carry, graph cutting and hashing."""
