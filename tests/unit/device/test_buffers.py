import numpy as np
import torch

from stoker.device.buffers import BufferPool


def test_buffer_reused_only_when_released():
    pool = BufferPool()
    a = pool.get("x", (4, 3), np.float32)
    b = pool.get("x", (4, 3), np.float32)
    assert a is not b  # a is still held
    a_id = id(a)
    del a
    c = pool.get("x", (4, 3), np.float32)
    assert id(c) == a_id


def test_tensor_handed_out_keeps_its_buffer():
    pool = BufferPool()
    buf = pool.get("x", (8,), np.int64)
    buf[:] = 7
    tensor = torch.from_numpy(buf)
    del buf
    other = pool.get("x", (8,), np.int64)
    other[:] = 1
    assert tensor.tolist() == [7] * 8  # the user's tensor was not overwritten
    view = tensor[2:4]
    del tensor
    again = pool.get("x", (8,), np.int64)
    again[:] = 2
    assert view.tolist() == [7, 7]


def test_keys_and_shapes_are_separate():
    pool = BufferPool()
    a = pool.get("x", (2,), np.uint8)
    del a
    assert pool.get("y", (2,), np.uint8) is not pool.get("x", (3,), np.uint8)


def test_pool_is_bounded():
    pool = BufferPool(max_per_key=2)
    held = [pool.get("x", (1,), np.uint8) for _ in range(5)]
    assert len(held) == 5
    assert pool.nbytes == 2
