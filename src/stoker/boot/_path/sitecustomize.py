"""First on PYTHONPATH through ``stoker.boot.child_env``: runs the hooks named in ``STOKER_BOOT`` in this
interpreter (see ``stoker/boot/__init__.py``), then the sitecustomize this one shadows (if any).

Standard library only (``stoker/settings.py`` is loaded by path): importing the stoker package would
import torch before the script does. A hook that fails is said on stderr; the script runs on.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

sys.modules["_stoker_boot"] = sys.modules[__name__]  # for the hooks: load()


def load(path, full=None):
    """The module in file ``path``, loaded once per process as ``full`` (default ``_stoker_boot_STEM``).

    Hook files load their own standard-library siblings with it: ``sys.modules["_stoker_boot"].load(path)``.
    """
    full = full or "_stoker_boot_" + os.path.splitext(os.path.basename(path))[0]
    if full not in sys.modules:
        spec = importlib.util.spec_from_file_location(full, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return sys.modules[full]


def _target(name):
    """A hook's module: a ``.py`` file loaded by path, else a module imported by name."""
    return load(name) if name.endswith(".py") else importlib.import_module(name)


def _run(hook, *args):
    target, _, function = hook.rpartition(":")
    try:
        getattr(_target(target), function)(*args)
    except Exception as exc:  # noqa: BLE001 -- never stop the user's script; say why the hook did not run
        sys.stderr.write(f"stoker: could not run {function} of {target} in this Python ({sys.executable}): {exc!r}\n")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``hooks[name]`` right after the top-level module ``name`` has executed."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):
        hooks = self.hooks.get(name)
        if hooks is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            if self.hooks.pop(name, None) is not None:
                for hook in hooks:
                    _run(hook, module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _stoker_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    settings = _target(os.path.join(os.path.dirname(os.path.dirname(here)), "settings.py"))
    hooks = json.loads(settings.env(settings.BOOT_ENV) or "{}")
    for hook in hooks.pop("", []):
        _run(hook)
    for name in [n for n in hooks if n in sys.modules]:
        for hook in hooks.pop(name):
            _run(hook, sys.modules[name])
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))
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
    _stoker_boot()
except Exception as exc:  # noqa: BLE001 -- never stop the user's script; say why it is not instrumented
    sys.stderr.write(f"stoker: could not start its hooks in this Python ({sys.executable}): {exc!r}\n")
