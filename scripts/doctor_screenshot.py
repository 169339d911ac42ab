"""Make docs/images/doctor-report.png: a real ``stoker doctor`` report of a small input-bound script, in Chromium.

The script is a training loop written the usual way: a torch ``Dataset`` that decodes photos one
``__getitem__`` at a time (PIL, with a resize), read by a ``DataLoader``, and a short step. The doctor runs
it unchanged; headless Chromium then draws its ``report.html`` (which opens offline) at 1100 px wide.

Run: ``python scripts/doctor_screenshot.py`` (needs the ``doctor`` and ``vision`` extras and Chromium).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "docs" / "images" / "doctor-report.png"
SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import numpy as np, torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class PhotoFolder(Dataset):
        def __init__(self, root):
            self.samples = sorted(Path(root).rglob("*.jpg"))
        def __len__(self):
            return len(self.samples)
        def __getitem__(self, i):
            image = Image.open(self.samples[i]).convert("RGB").resize((128, 128))
            return torch.from_numpy(np.asarray(image)).permute(2, 0, 1).float() / 255

    train_loader = DataLoader(PhotoFolder(sys.argv[1]), batch_size=16, shuffle=True)
    w = torch.randn(3 * 128 * 128, 10) * 0.01
    for epoch in range(2):
        for x in train_loader:
            (x.flatten(1) @ w).relu().sum()
            time.sleep(0.01)  # the rest of the step
    """
)


def main() -> int:
    from PIL import Image

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        sys.stderr.write("needs Chromium (apt-get install chromium)\n")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(0)
        for k in range(160):
            folder = root / "photos" / ("cat" if k % 2 else "dog")
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(folder / f"{k}.jpg")
        (root / "train.py").write_text(SCRIPT, encoding="utf-8")
        stoker = Path(sys.executable).with_name("stoker")
        cmd = [str(stoker), "doctor", "--out", "report", "--", sys.executable, "train.py", "photos"]
        subprocess.run(cmd, check=True, cwd=root)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shot = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        shot += [f"--user-data-dir={root / 'profile'}", "--window-size=1100,1500", f"--screenshot={OUT}"]
        subprocess.run([*shot, (root / "report" / "report.html").as_uri()], check=True, capture_output=True)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
