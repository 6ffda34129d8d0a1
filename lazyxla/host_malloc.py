"""Host memory that glibc's malloc keeps after a free, returned to the OS on request.

On the CPU backend XLA's buffers are host memory. glibc keeps part of what a run frees in its heaps
for the next allocation, which `torch.accelerator.empty_cache()` hands back (`release`), as a caching
allocator's empty_cache does. How much it keeps is glibc's setting; README ("Host memory on the CPU
backend") gives the settings that keep a run's buffers for the next run, and what they measured.
"""
from __future__ import annotations

import ctypes
import platform

_libc = None


def _glibc():
    """glibc, where it is the process's malloc (not one preloaded in its place: jemalloc,
    tcmalloc, which keep and return memory their own way); else None."""
    global _libc
    if _libc is None:
        _libc = False
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            try:
                process, libc = ctypes.CDLL(None), ctypes.CDLL("libc.so.6")
                if ctypes.cast(process.malloc, ctypes.c_void_p).value == \
                        ctypes.cast(libc.malloc, ctypes.c_void_p).value:
                    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
                    _libc = libc
            except (OSError, AttributeError):
                pass
    return _libc or None


def release() -> bool:
    """Return the free memory glibc keeps in its heaps to the OS (malloc_trim); False where the
    process's malloc is not glibc's."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
