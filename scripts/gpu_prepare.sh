#!/usr/bin/env bash
# Here, before a device call: what the lent GPU machine lacks for issue 14's GPU rows, in ignored
# folders a call can carry, and the exact call to make (benchmarks/gpu_runbook.sh runs there).
#
# The device image (/work/.library/device/KINDS.md) has python3 3.12 with torch, torchvision, pyarrow,
# xxhash, tokenizers, pillow, rich, tqdm, psutil and nvidia-ml-py; it lacks simplejpeg, and nothing
# can be fetched there. A call carries at most 64 MiB (the tree, about 3 MiB, included).
#
#     bash scripts/gpu_prepare.sh          # then make the run call it prints
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
mkdir -p .whl
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "simplejpeg>=1.7"
for need in data/images/photos data/text/friends.txt; do
    [ -e "$need" ] || { echo "gpu_prepare: $need is missing: python scripts/fetch_data.py images text" >&2; exit 1; }
done
total=$(du -scb .whl data/images/photos data/text/friends.txt | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "carried: $(( (total + tree) / 1048576 )) MiB of 64 (tree $(( tree / 1048576 )) MiB)"
cat <<'CALL'
run(command="bash benchmarks/gpu_runbook.sh", carry=[".whl", "data/images/photos", "data/text/friends.txt"], timeout_s=600)
CALL
