"""Started by ``stoker doctor`` through PYTHONPATH: instruments this interpreter, then runs the
sitecustomize this one shadows (if any). Does nothing unless STOKER_DOCTOR_EVENTS is set.

``child.py`` is loaded by its path, not as ``stoker.doctor.child``: importing the stoker package
would import torch before the script does. It patches torch, and registers the doctor's observer of
stoker loaders, once the script imports each.
"""

import importlib.util
import os
import sys


def _stoker_doctor_boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("STOKER_DOCTOR_EVENTS"):
        path = os.path.join(os.path.dirname(here), "child.py")
        spec = importlib.util.spec_from_file_location("_stoker_doctor_child", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.install_from_env()
    # run the sitecustomize this file shadows; site.py then looks this module up again
    me = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if me is not None:
            sys.modules["sitecustomize"] = me


try:
    _stoker_doctor_boot()
except Exception as exc:  # noqa: BLE001 -- never stop the user's script; say why it is not instrumented
    sys.stderr.write(f"stoker doctor: could not instrument this Python ({sys.executable}): {exc!r}\n")
