"""Host memory that glibc's malloc keeps after a free for the next run, returned to the OS on request.

On the CPU backend XLA's buffers are host memory. With glibc's defaults a buffer above its mmap
threshold is mapped afresh for each run and unmapped at its end, and freed heap memory goes back to
the OS, so each run faults its pages in again (a ResNet's inference step: 6000 page faults, 1.4x
the time). `keep_freed_memory` (at import) sets glibc's malloc as a caching allocator works: no
mmap'd chunks, heaps trimmed only above 1 GB free, and 64 MB of padding whenever a heap grows, so
that a heap of XLA's threads (their arenas' heaps hold 64 MB at most) is kept once its buffers are
freed instead of unmapped: a run reuses what the last one freed. `torch.accelerator.empty_cache()`
hands the kept memory back (`release`). What it does not reach: a single buffer too large for a
heap of XLA's threads (above about 64 MB) is still mapped afresh each run; MALLOC_ARENA_MAX=1 in
the environment puts every thread on the main heap, which has no such limit (at a cost: threads then
wait on its lock, 1.1x the time of a small model's step). LAZYXLA_HOST_MALLOC=0 leaves glibc's
defaults, as do glibc settings of the same kind in the environment. README: "Host memory
on the CPU backend".
"""
from __future__ import annotations

import ctypes
import os
import platform

from lazyxla import envflags

# mallopt parameters (glibc's malloc.h), each with the environment variable glibc reads at start
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
SETTINGS = (("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD, 1 << 30),
            ("MALLOC_MMAP_MAX_", _M_MMAP_MAX, 0),
            ("MALLOC_TOP_PAD_", _M_TOP_PAD, 64 << 20))  # (glibc deletes a thread's heap once empty
#                                                          unless its pad is a heap's size)
# environment settings that decide the same things: where the user set one, lazyxla sets none
_SAME_KIND = tuple(name for name, _, _ in SETTINGS) + ("MALLOC_MMAP_THRESHOLD_",)

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
                    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
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


def keep_freed_memory(cpu_backend: bool) -> str:
    """Sets SETTINGS with mallopt unless LAZYXLA_HOST_MALLOC=0, glibc is not the process's malloc,
    the environment sets the same things, or the backend is not the CPU (`cpu_backend`: host memory
    is then not its device memory). The settings are the whole process's, so they reach threads
    started before. Returns what host memory does, for the report."""
    if not envflags.flag("LAZYXLA_HOST_MALLOC", True):
        return "glibc's defaults (LAZYXLA_HOST_MALLOC=0)"
    libc = _glibc()
    if libc is None:
        return "the process's malloc is not glibc's: left as it is"
    own = [k for k in _SAME_KIND if k in os.environ]
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        own.append("GLIBC_TUNABLES")
    if own:
        return f"glibc's settings from the environment ({', '.join(own)})"
    if not cpu_backend:
        return "glibc's defaults (an accelerator backend: host memory is not its device memory)"
    for name, param, value in SETTINGS:
        if libc.mallopt(param, value) != 1:
            return f"glibc's defaults (mallopt refused {name})"
    others = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("MALLOC_"))
    return ("freed memory kept for the next run (" + ", ".join(f"{k}={v}" for k, _, v in SETTINGS)
            + (f"; from the environment: {', '.join(others)}" if others else "") + ")")
