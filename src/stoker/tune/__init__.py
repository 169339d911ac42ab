"""``stoker.tune``: pick a loader's workers, engine and prefetch depth by measurement (offline).

``tune(store, step_ms=30)`` measures short trials of the store's loader under a simulated
training step and returns a :class:`TuneResult`: every trial, the best setting with the exact
``stoker.Loader(...)`` call, and how close it is to the machine's limits. The CLI is ``stoker
tune STORE``. ``tune_script(["python", "train.py"])`` (``stoker tune -- python train.py``) runs
the user's script per trial instead, its own loop for a few steps. Tuning changes only how fast
batches come, never which rows or in what order.
"""

from stoker.tune.limits import Limits
from stoker.tune.result import TuneResult
from stoker.tune.space import Space, default_space
from stoker.tune.trial import Trial
from stoker.tune.tuner import tune, tune_script

__all__ = ["Limits", "Space", "Trial", "TuneResult", "default_space", "tune", "tune_script"]
