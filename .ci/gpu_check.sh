#!/usr/bin/env bash
# Device checks for a lent GPU machine, in one run (see ../shared/gpu/README.md):
#   ../shared/gpu/prepare.sh                       # once, here: copies the cffi wheels to .whl/
#   device run, carry [".whl"]:  bash .ci/gpu_check.sh
# Builds numptx there, runs every `gpu` test, the examples and `numptx demo` on the GPU, and
# leaves the logs in $OUT (or /tmp/numptx-gpu). Exit status: the number of failed steps.
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
if [ -d .whl ]; then         # the GPU image has no cffi (and no network): the carried wheels
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 99
    export PYTHONPATH=/tmp/site
fi
step build python3 -m pip install -q --no-build-isolation --no-deps --no-index -e .
step versions python3 -c "import sys, numba, numba_cuda, numptx; from numba import cuda; \
print(sys.version.split()[0], 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__); \
cuda.detect(); print('cc', cuda.get_current_device().compute_capability)"
step gpu_tests python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_templates.py \
    tests/test_cuda_launch.py tests/test_inject.py tests/test_bind.py tests/test_docs.py \
    tests/test_patch.py tests/test_pack.py tests/test_fitness.py tests/test_launch_plan.py \
    tests/test_resources.py tests/test_cuda_math.py tests/test_sass_parity.py
step bench_kernels python3 benchmarks/bench_kernels.py --gpu --functions
step bench_launch python3 benchmarks/bench_launch.py
step demo python3 -m numptx.cli demo
for ex in examples/*.py; do step "example_$(basename "$ex" .py)" python3 "$ex"; done
echo "failed steps: $failed (logs in $LOG)"
exit "$failed"
