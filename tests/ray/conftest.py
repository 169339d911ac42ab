"""One local Ray cluster (2 CPUs) for every test of this folder, started by the first test that asks for it.

Skipped, with a message, where Ray Data is not installed (``pip install 'stoker[ray]'``). The inputs
are real files: a text corpus made from pyarrow's bundled LICENSE.txt (2,000+ lines of real prose,
installed wherever stoker is) and a folder of small JPEG photos written with Pillow. Object-store output
goes to the loopback S3 server of tests/remote/ (moto), skipped without it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "unit" / "vision"))  # vision_images.py: small real JPEGs
from vision_images import photo, save  # noqa: E402


def _remote_fixtures():
    """tests/remote/conftest.py, loaded under its own name: its loopback S3 server (moto) fixtures."""
    path = Path(__file__).parent.parent / "remote" / "conftest.py"
    spec = importlib.util.spec_from_file_location("stoker_tests_remote_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


_remote = _remote_fixtures()
s3_server, s3 = _remote.s3_server, _remote.s3  # a real S3-protocol server on 127.0.0.1 (skipped without moto)


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'stoker[ray]' to run the Ray tests")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'stoker[ray]'")
    if ray.is_initialized():
        yield ray
        return
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def license_lines() -> list[str]:
    """pyarrow's LICENSE.txt, line by line (empty lines kept: the converters skip and count them)."""
    files = importlib.metadata.distribution("pyarrow").files or []
    path = next(f for f in files if f.name == "LICENSE.txt" and "licenses" in str(f))
    return Path(str(path.locate())).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A TSV corpus (label, text) whose labels change along the file: ``a`` only in its first fifth, ``c`` only
    in its last fifth, ``b`` between, so that partitions see different label subsets."""
    lines = [line.replace("\t", " ") for line in license_lines()]
    n = len(lines)
    path = tmp_path_factory.mktemp("corpus") / "corpus.tsv"
    rows = ["label\ttext"]
    for i, line in enumerate(lines):
        rows.append(f"{'a' if i < n // 5 else 'c' if i >= n - n // 5 else 'b'}\t{line}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> Path:
    """An ImageFolder tree of 3 classes x 5 JPEGs of varied sizes."""
    root = tmp_path_factory.mktemp("images") / "photos"
    for c, cls in enumerate(["zebra", "ant", "moth"]):
        for i in range(5):
            save(root / cls / f"img{i}.jpg", photo(48 + 8 * i, 64 + 6 * c, seed=c * 5 + i), quality=90)
    return root
