"""One rank of a torchrun launch started by tests/dist/test_torchrun.py.

``python -m torch.distributed.run ... worker.py PLAN.json``: the plan names the store, the loader
options, the output directory and the steps to run, in order. Each rank writes what it saw to
``<out>/<tag>.rank<R>.json`` (a dict of step name -> result); the test reads every rank's file.

Steps: ``unsplit`` (build a loader before init_process_group: the error or "no error"), ``init``
(gloo), ``epoch`` (a whole epoch's batches), ``head`` (the first batches of an epoch, then the
state saved to ``<out>/<tag>.state<R>.json``), ``resume`` (a new loader from a saved state, the
rest of its epoch), ``stale`` (one rank opens another store; the first pass's error on each rank).
``text_head`` and ``text_resume`` do as ``head`` and ``resume`` with a bucketed ``stoker.text.Loader``
over ``TEXT_ROWS`` short texts whose numeric label is the row number (its state in
``<out>/<tag>.textstate<R>.json``).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

import torch.distributed as dist

import stoker
import stoker.text

TEXT_ROWS = 301  # a prime: the text loader's batches never split evenly over the ranks
TEXT_OPTIONS = dict(batch_size=5, shuffle=True, seed=3, bucket_window=4, max_length=32, num_workers=0)


def text_rows() -> dict[str, list]:
    return {
        "text": [" ".join(["word"] * (1 + (i * 7) % 23)) for i in range(TEXT_ROWS)],
        "label": list(range(TEXT_ROWS)),
    }


def labels(batch) -> list[int]:
    return [int(x) for x in batch["labels" if "labels" in batch else "label"].tolist()]


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    out = Path(plan["out"])
    rank = int(os.environ["RANK"])
    options = plan["options"]
    seen: dict[str, object] = {"world": int(os.environ["WORLD_SIZE"])}

    def loader(store: str | None = None) -> stoker.Loader:
        return stoker.Loader(store or plan["store"], num_workers=0, **options)

    for step in plan["steps"]:
        kind, name = step["kind"], step.get("name", step["kind"])
        if kind == "unsplit":
            try:
                loader()
                seen[name] = "no error"
            except stoker.StokerError as exc:
                seen[name] = f"{type(exc).__name__}: {exc}"
        elif kind == "init":
            dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        elif kind == "epoch":
            ld = loader()
            ld.set_epoch(step["epoch"])
            seen[name] = [labels(b) for b in ld]
        elif kind == "head":
            ld = loader()
            ld.set_epoch(step["epoch"])
            it = iter(ld)
            seen[name] = [labels(next(it)) for _ in range(step["batches"])]
            (out / f"{plan['tag']}.state{rank}.json").write_text(json.dumps(ld.state_dict()))
            it.close()
        elif kind == "resume":
            dist.barrier()  # every rank's state is on disk
            ld = loader()
            ld.load_state_dict(json.loads(Path(step["state"]).read_text()))
            seen[name] = [labels(b) for b in ld]
        elif kind == "text_head":
            ld = stoker.text.Loader(text_rows(), **TEXT_OPTIONS)
            ld.set_epoch(step["epoch"])
            it = iter(ld)
            seen[name] = [labels(next(it)) for _ in range(step["batches"])]
            (out / f"{plan['tag']}.textstate{rank}.json").write_text(json.dumps(ld.state_dict()))
            it.close()
        elif kind == "text_resume":
            dist.barrier()  # every rank's state is on disk
            ld = stoker.text.Loader(text_rows(), **TEXT_OPTIONS)
            ld.load_state_dict(json.loads(Path(step["state"]).read_text()))
            seen[name] = [labels(b) for b in ld]
        elif kind == "stale":
            ld = loader(step["store"] if rank == step["rank"] else None)
            try:
                for _ in ld:
                    pass
                seen[name] = "no error"
            except stoker.StokerError as exc:
                seen[name] = f"{type(exc).__name__}: {exc}"
        else:
            raise ValueError(f"unknown step {kind!r}")
    (out / f"{plan['tag']}.rank{rank}.json").write_text(json.dumps(seen))
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
