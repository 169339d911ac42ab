import shutil
import sys
from importlib import resources
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers beside this file (text_samples.py)
from text_samples import SENTENCES  # noqa: E402, F401  (re-exported for fixtures)


@pytest.fixture(scope="session")
def vocab_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("vocab")
    with resources.as_file(resources.files("stoker.text") / "data" / "bert-base-uncased-vocab.txt") as p:
        shutil.copy(p, d / "vocab.txt")
    return d


@pytest.fixture(scope="session")
def reference(vocab_dir):
    transformers = pytest.importorskip("transformers")
    return transformers.BertTokenizerFast.from_pretrained(str(vocab_dir))
