"""The public surface: every name in __all__ exists, and nothing else is advertised by accident."""

import stoker
import stoker.errors

EXPECTED = {
    "BatchSampler",
    "BatchSource",
    "FixedBatches",
    "LoaderInfo",
    "Observer",
    "register_observer",
    "Binary",
    "Column",
    "Loader",
    "LoaderConfig",
    "Ragged",
    "Sampler",
    "Scalar",
    "Sequence",
    "StokerError",
    "Store",
    "StoreWriter",
    "String",
    "Subset",
    "Tensor",
    "__version__",
    "errors",
    "open",
    "write",
}

ERRORS = {  # the specific errors, so that `except stoker.ShardError` works without importing stoker.errors
    "ConfigError",
    "EmptyDatasetError",
    "InputError",
    "ManifestError",
    "SampleError",
    "SchemaError",
    "ShardError",
    "StateError",
    "StoreError",
    "StoreExistsError",
    "StoreNotFoundError",
    "StoreWriteError",
    "WorkerError",
}


def test_all_is_what_we_promise():
    assert set(stoker.__all__) >= EXPECTED
    for name in stoker.__all__:
        assert hasattr(stoker, name), name


def test_public_names_are_in_all():
    public = {n for n in dir(stoker) if not n.startswith("_")}
    modules = {
        "config",
        "convert",
        "device",
        "errors",
        "labels",
        "settings",
        "boot",
        "loader",
        "pipeline",
        "store",
        "stores",
        "cli",
        "text",
        "vision",
        "sources",
    }
    assert public - set(stoker.__all__) - modules == set()


def test_every_error_derives_from_the_base():
    for name in stoker.errors.__all__:
        cls = getattr(stoker.errors, name)
        assert issubclass(cls, stoker.errors.StokerError)
        assert name in stoker.errors.__doc__  # drawn in the tree


def test_specific_errors_are_exported_at_the_top():
    assert set(stoker.__all__) >= ERRORS
    for name in ERRORS:
        assert getattr(stoker, name) is getattr(stoker.errors, name)


def test_every_error_class_is_exported_at_the_top():
    assert set(stoker.errors.__all__) <= set(stoker.__all__)
    for name in stoker.errors.__all__:
        assert getattr(stoker, name) is getattr(stoker.errors, name)
