"""Page-locking memory stoker did not allocate (the process engine's shared-memory batch slots),
so a CUDA copy from it runs straight from the host memory (``non_blocking=True``) with no staging
copy. Each slot is registered once when it is made and unregistered when the pool closes.

Unmeasured: written for CUDA hosts, where ``torch.cuda.cudart()`` exposes the runtime's calls;
on a host without CUDA both functions do nothing.
"""

from __future__ import annotations

import numpy as np


def register_host(array: np.ndarray) -> bool:
    """Page-lock ``array``'s memory for CUDA (``cudaHostRegister``); whether it was done."""
    import torch

    if not torch.cuda.is_available() or array.nbytes == 0:
        return False
    err = torch.cuda.cudart().cudaHostRegister(array.ctypes.data, array.nbytes, 0)
    return int(getattr(err, "value", err)) == 0


def unregister_host(array: np.ndarray) -> None:
    """Undo :func:`register_host` (the memory stays valid; copies from it are staged again)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.cudart().cudaHostUnregister(array.ctypes.data)


__all__ = ["register_host", "unregister_host"]
