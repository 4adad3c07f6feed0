#!/usr/bin/env bash
# Device checks for a lent GPU machine, in one run (see ../shared/gpu/README.md):
#   ../shared/gpu/prepare.sh      # here, after committing: cffi/numpy wheels + a cp312 numptx wheel in .whl/
#   (add cp312 wheels of pytest, hypothesis and their deps to .whl/ when the image lacks them)
#   device run, carry [".whl"]:  bash .ci/gpu_check.sh
# Installs the carried wheel there (or builds numptx when none is carried), runs every `gpu` test, the examples and `numptx demo` on the GPU, and
# leaves the logs in $OUT (or /tmp/numptx-gpu). Exit status: the number of failed steps.
# NUMPTX_GPU_KERNELS=0 skips the kernel-time benchmark (about 90 s).
set -u
cd "$(dirname "$0")/.."
LOG="${OUT:-/tmp/numptx-gpu}"
mkdir -p "$LOG"
failed=0
step() {      # step NAME COMMAND...: run, log, count a failure, keep going
    local name=$1; shift
    echo "=== $name: $*"
    if "$@" > "$LOG/$name.txt" 2>&1; then echo "    ok"; else echo "    FAILED (rc $?)"; failed=$((failed + 1)); fi
    tail -n 15 "$LOG/$name.txt"
}
if ls .whl/numptx-*.whl >/dev/null 2>&1; then
    # the recipe: the GPU image has no cffi, no compiler use and no network, so numptx comes as
    # a cp312 wheel built here; tests run from a copy without numptx/ so the wheel is imported
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 99
    export PYTHONPATH=/tmp/site
    run=/tmp/numptx-run
    rm -rf "$run" && mkdir -p "$run"
    cp -r tests examples docs benchmarks native README.md pyproject.toml "$run"/
    cd "$run"
else
    step build python3 -m pip install -q --no-build-isolation --no-deps --no-index -e .
fi
step versions python3 -c "import sys, numba, numba_cuda, numptx; from numba import cuda; \
print(sys.version.split()[0], 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__); \
cuda.detect(); print('cc', cuda.get_current_device().compute_capability)"
# every `gpu` test of every file (a file's list went stale: test_build_info's was missed)
step gpu_tests python3 -m pytest -m gpu -q -rfEs --tb=line -p no:cacheprovider tests
step bench_search python3 benchmarks/bench_search.py --gpu --points 20000 --population 4096 --generations 10
step bench_search_unpipelined python3 benchmarks/bench_search.py --gpu --points 20000 --population 4096 \
    --generations 10 --no-pipeline
[ "${NUMPTX_GPU_KERNELS:-1}" = 0 ] || step bench_kernels python3 benchmarks/bench_kernels.py --gpu --functions
step bench_launch python3 benchmarks/bench_launch.py
step demo python3 -m numptx.cli demo
for ex in examples/*.py; do step "example_$(basename "$ex" .py)" python3 "$ex"; done
echo "failed steps: $failed (logs in $LOG)"
exit "$failed"
