"""The command line starts light: ``import stoker``, ``stoker --help`` and ``stoker doctor`` up to the
script's start import no torch (1.8 s and ~600 MB here); each public name is imported on first use."""

import os
import subprocess
import sys
from pathlib import Path


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_stoker_and_the_command_line_parser_import_no_torch():
    code = "import sys, stoker; from stoker.cli.main import build_parser; build_parser(); print('torch' in sys.modules)"
    assert _python(code) == "False"


def test_public_names_are_imported_on_first_use():
    code = (
        "import sys, stoker; from stoker import Store, StokerError; "
        "print(Store.__module__, StokerError.__module__, 'torch' in sys.modules, stoker.Loader.__module__, "
        "'torch' in sys.modules, callable(stoker.doctor), stoker.sources.Arrays.__name__, sorted(dir(stoker)) == "
        "sorted(stoker.__all__))"
    )
    assert _python(code).split() == [
        "stoker.store.reader",
        "stoker.errors",
        "False",
        "stoker.loader",
        "True",
        "True",
        "Arrays",
        "True",
    ]
    assert (
        "no attribute 'Nope'"
        in subprocess.run([sys.executable, "-c", "import stoker; stoker.Nope"], capture_output=True, text=True).stderr
    )


def test_the_doctor_starts_the_script_before_it_imports_torch(tmp_path):
    script = tmp_path / "probe.py"  # reads the doctor's memory map: is torch's library loaded in it?
    script.write_text(
        "import os\nmaps = open(f'/proc/{os.getppid()}/maps').read()\nprint('LIBTORCH', 'libtorch' in maps)\n"
    )
    stoker = Path(sys.executable).with_name("stoker")
    out = subprocess.run(
        [
            str(stoker),
            "doctor",
            "--out",
            str(tmp_path / "r"),
            "--no-html",
            "--no-trace",
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    assert "LIBTORCH False" in out.stdout + out.stderr
