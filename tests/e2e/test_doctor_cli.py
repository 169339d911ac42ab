"""``stoker doctor -- python script.py`` on real scripts written to temporary directories."""

import html as html_lib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HANG_S = 600  # a bound for a hung run, not a speed: on a loaded machine, two torch imports took over 120 s

INPUT_BOUND = """
import time, torch
from torch.utils.data import DataLoader, Dataset

class SlowDataset(Dataset):
    def __len__(self):
        return 48
    def __getitem__(self, i):
        time.sleep(0.005)  # 48 rows: at least 0.24 s of data wait against a loop body of microseconds
        return torch.full((4,), float(i))

for batch in DataLoader(SlowDataset(), batch_size=8):
    batch.sum()
print("done", flush=True)
"""

COMPUTE_BOUND = """
import time, torch
from torch.utils.data import DataLoader, TensorDataset
w = torch.randn(256, 256)
for (x,) in DataLoader(TensorDataset(torch.randn(48, 256)), batch_size=8):
    for _ in range(10):
        x = torch.tanh(x @ w)
    time.sleep(0.05)  # at least 50 ms a step between fetches of 8 rows: a loaded machine cannot turn the verdict
"""

CRASHES = """
import torch
from torch.utils.data import DataLoader, TensorDataset
for i, _ in enumerate(DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)):
    if i == 3:
        raise RuntimeError("the model exploded")
"""

NO_LOADER = """
import sys
print("no loader here")
sys.exit(3)
"""

STOKER_LOADER = """
import sys, time
import numpy as np
import stoker

stoker.write(sys.argv[1], {"x": np.arange(300, dtype=np.int64)})

def slow_collate(batch):
    time.sleep(0.05)  # 6 batches: 0.3 s in collate against reads of 50 rows of a store
    return batch

for batch in stoker.Loader(sys.argv[1], batch_size=50, num_workers=1, collate_fn=slow_collate):
    batch["x"].sum()
"""

STOKER_PROCESSES = """
import time, torch
import stoker

class MyDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i))}

for batch in stoker.Loader(MyDataset(), batch_size=8, num_workers=2):
    time.sleep(0.001)
"""


WORKERS = """
import time, torch
from torch.utils.data import DataLoader, Dataset

class Busy(Dataset):
    def __len__(self):
        return 24
    def __getitem__(self, i):
        return sum(i * i for i in range(300_000))

for _ in DataLoader(Busy(), batch_size=2, num_workers=2, persistent_workers=True):
    time.sleep(0.001)
time.sleep(1.0)  # the workers live on, idle, for ten samples: a process that exits between samples loses that interval's CPU
"""


TWO_LOADERS = """
import os, random, sys, time
import numpy as np, torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

class RandomCrop:  # named as torchvision's: a crop drawn per call
    def __init__(self, size):
        self.size = size
    def __call__(self, x):
        i, j = random.randint(0, x.shape[1] - self.size), random.randint(0, x.shape[2] - self.size)
        return x[:, i : i + self.size, j : j + self.size]

class Photos(Dataset):
    def __init__(self, root, transform=None):
        self.root, self.transform = root, transform
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    def __len__(self):
        return len(self.files)
    def __getitem__(self, i):
        time.sleep(0.004)  # 32 rows per loader: at least 0.13 s of data wait each against microseconds of loop
        with Image.open(self.files[i]) as im:
            x = torch.from_numpy(np.asarray(im.convert("RGB"))).permute(2, 0, 1)
        return self.transform(x) if self.transform else x[:, :24, :24]

if __name__ == "__main__":
    train_loader = DataLoader(Photos(sys.argv[1], RandomCrop(24)), batch_size=16)
    val_loader = DataLoader(Photos(sys.argv[1]), batch_size=4)
    for batch in train_loader:
        batch.float().sum()
    for batch in val_loader:
        batch.float().sum()
"""


def doctor(tmp_path, source, *extra, args=()):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "report"
    cmd = [
        sys.executable,
        "-m",
        "stoker.cli.main",
        "doctor",
        "--out",
        str(out),
        "--interval",
        "0.1",
        *extra,
        "--",
        sys.executable,
        str(script),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S, cwd=tmp_path)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return proc, report, out


@pytest.fixture(scope="module")
def input_bound(tmp_path_factory):
    return doctor(tmp_path_factory.mktemp("input"), INPUT_BOUND)


def test_input_bound_script(input_bound):
    proc, report, out = input_bound
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout  # the script's own output passes through
    assert report["verdict"] == "input-bound" and report["stall_share"] > 0.5
    assert report["bottleneck_stage"].endswith("SlowDataset.__getitem__")
    assert "stoker doctor: input-bound" in proc.stdout and "SlowDataset.__getitem__" in proc.stdout
    assert report["recommendations"] and report["loaders"][0]["steps"] == 6
    assert "could not instrument" not in proc.stderr


def test_trace_holds_steps_and_stages(input_bound):
    _, _, out = input_bound
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    names = [e["name"] for e in events]
    assert names.count("data wait") == 6
    assert sum(n.endswith("fetch") for n in names) == 6
    assert all(e["dur"] >= 0 for e in events if e.get("ph") == "X")


def _browser():
    for name in (
        os.environ.get("STOKER_CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.browser
@pytest.mark.skipif(
    _browser() is None, reason="needs headless Chromium: apt-get install chromium (or set STOKER_CHROMIUM)"
)
def test_html_report_renders_offline_in_headless_chromium(input_bound, tmp_path):
    _, report, out = input_bound
    html = out / "report.html"
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", html.read_text())  # nothing to fetch: it opens offline
    cmd = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        html.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S).stdout
    assert 'id="verdict">input-bound<' in dom
    for plot in ("plot-steps", "plot-resources", "plot-stages"):
        start = dom.index(f'id="{plot}"')
        assert "<svg" in dom[start : start + 400] and "</svg>" in dom[start:]
    assert dom.count("<path") > 20  # bars and lines were drawn
    assert "SlowDataset.__getitem__" in dom


@pytest.fixture(scope="module")
def two_loaders(tmp_path_factory):
    from PIL import Image

    tmp = tmp_path_factory.mktemp("two")
    rng = np.random.default_rng(0)
    for k in range(32):
        folder = tmp / "photos" / ("cat" if k % 2 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(folder / f"{k}.jpg")
    return (*doctor(tmp, TWO_LOADERS, args=[str(tmp / "photos")]), tmp / "photos")


def test_two_loaders_random_crops_and_exact_commands(two_loaders):
    proc, report, _, photos = two_loaders
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].count("input-bound") == 1  # the headline says it once
    loaders = {ld["name"]: ld for ld in report["loaders"]}
    train, val = loaders["train_loader = DataLoader(Photos)"], loaders["val_loader = DataLoader(Photos)"]
    assert (train["batch_size"], val["batch_size"]) == (16, 4)
    assert train["random"] is True and train["info"]["random_transforms"] == ["RandomCrop"] and val["random"] is False
    assert train["stages"][0]["calls"] == 32 and train["stages"][0]["unit"] == "sample"  # per sample, not per batch
    recs = {}
    for r in report["recommendations"]:
        recs.setdefault(r["loader"], []).append(r)
    assert not any(r["title"].startswith("Precompute") for r in recs[train["name"]])  # would freeze the crops
    (aug,) = [r for r in recs[train["name"]] if "encoded" in r["title"]]
    assert f"stoker convert images {photos} stores/photos " in aug["action"]
    # the script's own random-offset crop, kept as one: no RandomResizedCrop, no flip it never had
    assert "ImageSource('stores/photos', stoker.vision.Compose([stoker.vision.RandomCrop(24)]))" in aug["action"]
    assert "train_transforms" not in aug["action"] and "Flip" not in aug["action"]
    (pre,) = [r for r in recs[val["name"]] if r["title"].startswith("Precompute")]
    assert f"stoker convert images {photos} stores/photos --mode resized --size 24" in pre["action"]
    assert "batch_size=4," in pre["action"] and "a squash to 24x24" in pre["action"]  # its crop is not known: said
    assert "loader" in proc.stdout and "train_loader = DataLoader(Photos)" in proc.stdout


LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const page = document.documentElement.clientWidth;
  const svgs = [...document.querySelectorAll('figure svg')];
  const widest = Math.max(...svgs.map(s => s.getBoundingClientRect().right));
  document.body.setAttribute('data-layout', JSON.stringify({page, widest, scroll: document.documentElement.scrollWidth}));
});
</script></body>"""


@pytest.mark.browser
@pytest.mark.skipif(
    _browser() is None, reason="needs headless Chromium: apt-get install chromium (or set STOKER_CHROMIUM)"
)
def test_two_loader_html_report_fits_the_page_in_headless_chromium(two_loaders, tmp_path):
    _, report, out, _ = two_loaders
    page = tmp_path / "report.html"
    page.write_text((out / "report.html").read_text().replace("</body>", LAYOUT_PROBE))
    base = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*base, "--window-size=900,3000", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=HANG_S
    ).stdout
    layout = json.loads(html_lib.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    assert layout["widest"] <= layout["page"] and layout["scroll"] <= layout["page"]  # no plot overflows to the right
    for ld in report["loaders"]:  # two loaders of one class stay two, in the tables and the plots
        assert dom.count(html_lib.escape(ld["name"])) >= 2
    shot = os.environ.get("STOKER_DOCTOR_SCREENSHOT")  # set it to look at the page: the image is kept there
    if shot:
        subprocess.run(
            [*base, "--window-size=900,3000", f"--screenshot={shot}", (out / "report.html").as_uri()],
            capture_output=True,
            timeout=HANG_S,
        )
        assert os.path.getsize(shot) > 10_000


def test_compute_bound_script(tmp_path):
    proc, report, _ = doctor(tmp_path, COMPUTE_BOUND, "--no-html")
    assert proc.returncode == 0, proc.stderr
    assert report["verdict"] == "compute-bound", report["message"]
    assert report["stall_share"] < 0.2


def test_stoker_loader_script_gets_its_stages_timed(tmp_path):
    proc, report, _ = doctor(tmp_path, STOKER_LOADER, "--no-html", "--no-trace", args=[str(tmp_path / "store")])
    assert proc.returncode == 0, proc.stderr
    (ld,) = report["loaders"]
    assert ld["info"]["kind"] == "stoker" and ld["steps"] == 6
    assert {"read", "collate", "transfer", "h2d_wait"} <= {r.get("key") for r in ld["stages"]}
    assert report["verdict"] == "input-bound" and report["bottleneck_stage"] == "collate"


def test_stoker_loader_worker_processes_report_their_stages(tmp_path):
    proc, report, out = doctor(tmp_path, STOKER_PROCESSES, "--no-html")
    assert proc.returncode == 0, proc.stderr
    (ld,) = report["loaders"]
    assert ld["name"] == "stoker.Loader(MyDataset)" and ld["steps"] == 8
    assert ld["info"]["engine"] == "processes" and ld["info"]["num_workers"] == 2
    stages = {r["key"]: r for r in ld["stages"]}
    assert stages["read"]["where"] == "worker processes" and stages["read"]["calls"] >= 1
    assert stages["collate"]["calls"] == stages["read"]["calls"]
    assert "stages of stoker.Loader(MyDataset)" in proc.stdout and "read (MyDataset)" in proc.stdout
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    main = {e["pid"] for e in trace if e.get("name") == "data wait"}
    assert {e["pid"] for e in trace if e.get("name") == "stoker.read"} - main  # spans on the workers' tracks


def test_crashing_script_gets_its_report_and_exit_code(tmp_path):
    proc, report, _ = doctor(tmp_path, CRASHES, "--no-html")
    assert proc.returncode == 1
    assert "the model exploded" in proc.stderr
    assert report["exit_code"] == 1 and report["loaders"][0]["steps"] == 4
    assert "exited with code 1" in proc.stdout


def test_script_without_loader_and_its_exit_code(tmp_path):
    proc, report, _ = doctor(tmp_path, NO_LOADER, "--no-html", "--no-trace")
    assert proc.returncode == 3
    assert "no loader here" in proc.stdout
    assert report["verdict"] == "no data loader seen" and "no data loader seen" in proc.stdout


def test_json_on_stdout_alone_the_scripts_output_on_stderr(tmp_path):
    proc, report, _ = doctor(tmp_path, NO_LOADER, "--json", "--no-html", "--no-trace")
    assert proc.returncode == 3
    assert json.loads(proc.stdout) == report  # stdout is the report's JSON and nothing else
    assert "no loader here" in proc.stderr and "no loader here" not in proc.stdout


def test_worker_processes_count_in_the_scripts_cpu(tmp_path):
    proc, report, _ = doctor(tmp_path, WORKERS, "--no-html", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    res = report["resources"]
    assert res["procs_max"] >= 3  # the script and its two workers
    # The workers' CPU is in the tree's sum and not in the script's own: were they not counted, the
    # two sums would be the same floats. How much of it the samples catch depends on the machine's
    # load (a loaded machine once cut it below a 0.4 margin of the expected CPU), so no amount is.
    assert res["cpu_s_tree"] - res["cpu_s_root"] > 0, res
    (ld,) = report["loaders"]
    getitem = ld["stages"][0]
    assert getitem["stage"].endswith("Busy.__getitem__") and getitem["where"] == "2 worker processes"
    assert getitem["calls"] == 24 and getitem["unit"] == "sample"  # 24 samples, timed inside the forked workers


def test_usage_errors(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "doctor", "--help"], capture_output=True, text=True, timeout=HANG_S
    )
    assert proc.returncode == 0 and "stoker doctor [options] -- COMMAND" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "doctor"], capture_output=True, text=True, timeout=HANG_S
    )
    assert proc.returncode == 2 and "after '--'" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(tmp_path), "--", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 1 and "cannot start" in proc.stderr and "Traceback" not in proc.stderr
