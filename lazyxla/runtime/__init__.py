"""Compilation cache and executor: graphs in, device arrays out."""
