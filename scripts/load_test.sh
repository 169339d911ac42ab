#!/usr/bin/env bash
# The test suite on a loaded machine: `make test` N times while a CPU hog keeps every core busy.
#
#   scripts/load_test.sh            # 5 runs beside one busy process per core
#   scripts/load_test.sh 3          # 3 runs
#   HOG_PROCS=4 PULL=1 LOGS=/tmp/load scripts/load_test.sh
#
# HOG_PROCS: busy processes (default: as many as cores; 0: start none, for several checkouts tested at
# once beside one hog started by hand: python scripts/hog.py &); PULL=1: `git pull -q` before each run
# (to follow a branch while it moves); LOGS: where each run's output goes (default: a new temp dir).
# The hog (scripts/hog.py, pure Python: nothing to install) is stopped on exit, Ctrl-C included.
# Prints one line per run (pass/fail, minutes, pytest's summary) and the tally; exits 0 only if
# every run passed.
set -u
cd "$(dirname "$0")/.."

runs=${1:-5}
procs=${HOG_PROCS:-$(nproc)}
logs=${LOGS:-$(mktemp -d -t stoker-load-XXXXXX)}
mkdir -p "$logs"
python=${PYTHON:-python3}
[ -x .venv/bin/python ] && python=.venv/bin/python

hog=""
stop_hog() {
    if [ -n "$hog" ]; then
        kill -TERM "$hog" 2>/dev/null
        wait "$hog" 2>/dev/null
        hog=""
    fi
}
trap stop_hog EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

if [ "$procs" -gt 0 ]; then
    "$python" scripts/hog.py -n "$procs" &
    hog=$!
fi

passed=0
for i in $(seq 1 "$runs"); do
    if [ "${PULL:-0}" = 1 ]; then
        git pull -q || echo "run $i: git pull failed; testing the checkout as it is" >&2
    fi
    log="$logs/run-$i.log"
    start=$(date +%s)
    make test >"$log" 2>&1
    rc=$?
    minutes=$(awk -v s="$(($(date +%s) - start))" 'BEGIN { printf "%.1f", s / 60 }')
    summary=$(grep -E "^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s" "$log" | tail -1)
    if [ "$rc" = 0 ]; then
        passed=$((passed + 1))
        echo "run $i: pass  ${minutes} min  $summary  (load $(cut -d' ' -f1-3 /proc/loadavg))"
    else
        echo "run $i: FAIL  ${minutes} min  $summary  (load $(cut -d' ' -f1-3 /proc/loadavg))"
        grep -E "^(FAILED|ERROR) " "$log" | sed 's/^/    /'
    fi
done
echo "tally: $passed/$runs passed beside $procs busy processes; logs in $logs"
[ "$passed" = "$runs" ]
