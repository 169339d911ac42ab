"""A malformed loader state is a StateError naming the field, never KeyError/AttributeError (issue 15 item 3)."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.errors import StateError

pytestmark = pytest.mark.faults


@pytest.mark.parametrize(
    "change,field",
    [
        (lambda s: s.pop("order"), "order"),
        (lambda s: s.update(order=[1, 2]), "order"),
        (lambda s: s.update(epoch=-3), "epoch"),
        (lambda s: s.update(epoch="1"), "epoch"),
        (lambda s: s.pop("batches_done"), "batches_done"),
        (lambda s: s.update(batches_done=None), "batches_done"),
    ],
)
def test_malformed_state_names_the_field(change, field):
    loader = stoker.Loader(np.arange(40, dtype=np.int64), batch_size=4)
    state = loader.state_dict()
    change(state)
    with pytest.raises(StateError, match=f"'{field}'"):
        loader.load_state_dict(state)


def test_a_good_state_still_loads():
    loader = stoker.Loader(np.arange(40, dtype=np.int64), batch_size=4)
    state = {**loader.state_dict(), "epoch": np.int64(2), "batches_done": 3}
    loader.load_state_dict(state)
    assert loader.epoch == 2 and len(list(loader)) == 7
