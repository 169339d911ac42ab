#!/usr/bin/env bash
# On a lent GPU machine, in one call: every GPU row of issue 14, logs and JSON into $OUT.
#
# Prepared here by scripts/gpu_prepare.sh (the wheels the image lacks, the photos, the call to make).
# Each step has its own time limit, so that the whole stays under the device's 10 minutes a command
# and a step that hangs costs only its own figures; every log is tee'd into $OUT as it is written,
# so what ran comes back even when the call is cut short. Without CUDA (a dry run here) the GPU
# steps say so and the script goes on.
#
#     bash benchmarks/gpu_runbook.sh       # OUT=... PYTHON=... DATA=... to change where and what
#     OUT=/tmp/gpu PYTHON=.venv/bin/python RUNBOOK_PERCENT=15 bash benchmarks/gpu_runbook.sh   # a dry run here
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu}
PY=${PYTHON:-python3}
DATA=${DATA:-data}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # stoker from this tree, not installed there

step() {  # step NAME SECONDS COMMAND...: one timed step (RUNBOOK_PERCENT scales the limits), output in $OUT/NAME.log
    local name=$1 limit=$(($2 * ${RUNBOOK_PERCENT:-100} / 100))
    shift 2
    echo "== $name (at most ${limit}s): $*" | tee "$OUT/$name.log"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc after $((SECONDS - t0))s" | tee -a "$OUT/$name.log"
    tail -n 25 "$OUT/$name.log"
}

step env 60 "$PY" -c "import os, torch, stoker; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', 'cores', len(os.sched_getaffinity(0)),
      'stoker', stoker.__file__)"
step gpu_tests 120 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/gpu tests/unit/vision
step cuda 240 "$PY" benchmarks/bench_cuda.py --data "$DATA" --seconds 2 --json "$OUT/cuda.json"
step jpeg_threads 150 "$PY" benchmarks/bench_jpeg_threads.py --data "$DATA" --seconds 2 --all
step scaling 150 "$PY" benchmarks/bench_scaling.py --data "$DATA" --rounds 1 --json "$OUT/scaling.json"
echo "runbook done: $(ls "$OUT" | tr '\n' ' ')"
