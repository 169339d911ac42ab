"""Device: recycled (pinned) host buffers and host-to-device copies. Owns CUDA, nothing else.

Files:
    buffers.py   BufferPool: buffers reused only when nobody else holds them
    transfer.py  Transfer: from_numpy on CPU; side-stream copies (rows reordered after them) and events on CUDA
"""

from stoker.device.buffers import BufferPool
from stoker.device.transfer import Transfer, resolve_device

__all__ = ["BufferPool", "Transfer", "resolve_device"]
