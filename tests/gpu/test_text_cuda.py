import pytest
import torch

import stoker.convert
import stoker.text

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

TEXTS = [f"sentence {i} with " + "more words " * (i % 11) for i in range(200)]


def test_cuda_batches_equal_cpu_batches_and_ids_cross_the_bus_as_uint16(tmp_path):
    store = stoker.convert.text(TEXTS, tmp_path / "s", max_length=32)
    for source in (TEXTS, store):
        cpu_loader = stoker.text.Loader(source, batch_size=16, max_length=32, shuffle=True, seed=1)
        cpu = list(cpu_loader)
        gpu_loader = stoker.text.Loader(source, batch_size=16, max_length=32, shuffle=True, seed=1, device="cuda")
        gpu = list(gpu_loader)
        assert gpu_loader.source.sends_narrow_ids and not cpu_loader.source.sends_narrow_ids
        assert len(cpu) == len(gpu)
        for a, b in zip(cpu, gpu):
            assert b["input_ids"].is_cuda and b["input_ids"].dtype == torch.int64
            assert torch.equal(a["input_ids"], b["input_ids"].cpu()) and torch.equal(
                a["attention_mask"], b["attention_mask"].cpu()
            )
        assert gpu_loader.report().real_tokens == sum(int(b["attention_mask"].sum()) for b in cpu)
