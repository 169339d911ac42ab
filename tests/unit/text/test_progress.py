"""Progress of the on-the-fly token count (text/progress.py) and of `convert text`."""

import pytest

import stoker.convert
import stoker.text
from stoker.errors import ConfigError

TEXTS = [f"sentence number {i} with some words" for i in range(300)]


def test_the_length_pass_reports_every_row_to_a_callable():
    seen = []
    loader = stoker.text.Loader(TEXTS, batch_size=8, shuffle=True, progress=seen.append)
    list(loader)  # the pass runs in the background during the first epoch
    assert loader.report().bucketing == "on" and sum(seen) == len(TEXTS)
    seen.clear()
    stoker.text.Loader(TEXTS, batch_size=None, max_tokens=512, shuffle=True, progress=seen.append)
    assert sum(seen) == len(TEXTS)  # max_tokens needs every length at construction


def test_progress_true_draws_a_bar_on_stderr_and_false_none(capsys):
    list(stoker.text.Loader(TEXTS, batch_size=8, shuffle=True, progress=True))
    assert "counting tokens" in capsys.readouterr().err
    list(stoker.text.Loader(TEXTS, batch_size=8, shuffle=True, progress=False))
    list(stoker.text.Loader(TEXTS, batch_size=8, shuffle=True))  # None: stderr is not a terminal here
    assert capsys.readouterr().err == ""


def test_convert_text_reports_progress(tmp_path):
    seen = []
    stoker.convert.text(TEXTS, tmp_path / "s", progress=seen.append)
    assert sum(seen) == len(TEXTS)


def test_a_bad_progress_is_refused():
    with pytest.raises(ConfigError, match="progress must be") as err:
        stoker.text.Loader(TEXTS, batch_size=8, progress="yes")
    assert err.value.option == "progress"
