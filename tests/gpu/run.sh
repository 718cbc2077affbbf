#!/usr/bin/env bash
# tests/gpu/run.sh: the whole GPU check on a machine with an NVIDIA GPU, in a few minutes.
#
#   tests/gpu/run.sh [RESULTS_DIR]        (default: $OUT if set, else ./gpu-results)
#
# Builds libruntime with its CUDA kernels (nvcc from PATH or /usr/local/cuda/bin), checks that it
# still links nothing of CUDA's, runs the GPU tests (cuBLAS and the built-in GEMM kernel), the
# CPU engine tests and the GPU benchmark against torch eager. Python packages missing from the
# machine are installed from wheels carried in RT_GPU_WHEELS (default ./.whl), else with pip when
# it can reach an index; steps whose packages are missing skip. Last, compute-sanitizer's
# racecheck over the kernels that share memory between threads (RT_GPU_SANITIZE=0 skips it).
# RT_GPU_PREBUILT=1 uses runtime_py/libruntime.so as it is (built elsewhere with the same nvcc),
# saving the build's minute of GPU time; RT_GPU_SOURCE names the source in the report where
# the machine's git history is not the tree's. Everything goes to RESULTS_DIR/gpu_check.md; the exit
# status is that of the tests.
set -u
cd "$(dirname "$0")/../.."
RESULTS=${1:-${OUT:-$PWD/gpu-results}}
mkdir -p "$RESULTS"
REPORT="$RESULTS/gpu_check.md"
export PATH="$PATH:/usr/local/cuda/bin"
PY=${PYTHON:-python3}
STATUS=0

section() { printf '\n## %s\n\n```\n' "$1" >>"$REPORT"; }
end_section() { printf '```\n' >>"$REPORT"; }
run() {  # run SECONDS TITLE COMMAND...: output into the report, failures counted
    local limit=$1 title=$2; shift 2
    section "$title"
    local start=$SECONDS
    timeout "$limit" "$@" >>"$REPORT" 2>&1
    local rc=$?
    printf '[exit %d after %ds]\n' "$rc" "$((SECONDS - start))" >>"$REPORT"
    end_section
    return $rc
}

printf '# GPU check of libruntime (%s)\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" >"$REPORT"
run 30 "machine" bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  nvcc --version | tail -2; '"$PY"' --version; cmake --version | head -1;
  echo "source: ${RT_GPU_SOURCE:-$(git log --oneline -1)}"'

# ---- python packages --------------------------------------------------------------------------
# Wheels carried to a machine without an index (RT_GPU_WHEELS, default ./.whl) go in first.
WHEELS=${RT_GPU_WHEELS:-$PWD/.whl}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    run 60 "install the carried wheels ($WHEELS)" $PY -m pip install -q --no-index --no-deps \
      --no-compile --no-cache-dir --upgrade --target /tmp/rt-gpu-site "$WHEELS"/*.whl
    export PYTHONPATH="/tmp/rt-gpu-site${PYTHONPATH:+:$PYTHONPATH}"
fi
missing=$($PY - <<'PYEOF'
import importlib.util
print(" ".join(m for m in ("cffi", "numpy", "pytest", "hypothesis", "onnx")
               if importlib.util.find_spec(m) is None))
PYEOF
)
if [ -n "$missing" ]; then
    run 60 "pip install $missing" $PY -m pip install -q --retries 0 --timeout 10 $missing
fi

# ---- build ----------------------------------------------------------------------------------
BUILD=build/gpu-check
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ "${RT_GPU_PREBUILT:-0}" = 1 ]; then  # built elsewhere with the same nvcc: saves GPU time
  run 30 "build: prebuilt runtime_py/libruntime.so (RT_GPU_PREBUILT=1)" bash -c \
    'ls -l runtime_py/libruntime.so' || STATUS=1
elif command -v cmake >/dev/null; then
  run 300 "build (cmake + nvcc; full log in build.log)" bash -c "{ cmake -S . -B $BUILD ${GEN[*]} \
    -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD -j 16; } >'$RESULTS/build.log' 2>&1; \
    rc=\$?; grep -E 'CUDA|nvcc|error|warning' '$RESULTS/build.log' | head -40; [ \$rc = 0 ] \
    && cp $BUILD/libruntime.so runtime_py/libruntime.so \
    && ls -l $BUILD/rt_cuda_kernels.fatbin runtime_py/libruntime.so" || STATUS=1
else  # no CMake on the machine: the same build by hand (what CMakeLists.txt does)
  mkdir -p "$BUILD"
  run 300 "build (no cmake: nvcc + cc by hand; full log in build.log)" bash -c "{
    printf '#include \"%s\"\\n' \$PWD/libruntime/backends/cuda/kernels/*.cu > $BUILD/rt_cuda_kernels.cu &&
    nvcc -std=c++17 -O3 -fatbin --threads 0 -gencode arch=compute_80,code=sm_80 \
      -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
      -Ilibruntime/backends/cuda/kernels -o $BUILD/rt_cuda_kernels.fatbin $BUILD/rt_cuda_kernels.cu &&
    cc -std=c11 -O3 -shared -fPIC -fvisibility=hidden -D_DEFAULT_SOURCE -DRT_HAVE_CUDA_KERNELS \
      -fno-trapping-math -fno-math-errno -Iinclude -Ilibruntime \
      -DRT_CUDA_FATBIN_PATH='\"'\$PWD/$BUILD/rt_cuda_kernels.fatbin'\"' \
      libruntime/*.c libruntime/core/*.c libruntime/format/*.c libruntime/ops/*.c \
      libruntime/ops/*/*.c libruntime/ops/matmul/gemm/*.c libruntime/backends/*.c \
      libruntime/backends/cpu/*.c \
      libruntime/backends/cuda/*.c libruntime/backends/cuda/fatbin.S \
      -Wl,--no-undefined -lpthread -lm -ldl -o $BUILD/libruntime.so; } >'$RESULTS/build.log' 2>&1 \
    && cp $BUILD/libruntime.so runtime_py/libruntime.so \
    && ls -l $BUILD/rt_cuda_kernels.fatbin runtime_py/libruntime.so" || STATUS=1
fi

# cuBLAS: the library's own search (ld.so paths) first; else the toolkit's or a pip wheel's
# (nvidia/cublas/lib for CUDA 12 wheels, nvidia/cu13/lib for CUDA 13 ones).
if [ -z "${RT_CUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
    for f in /usr/local/cuda/lib64/libcublas.so.1[0-9] $($PY - <<'PYEOF' 2>/dev/null
import glob, os, sys
for d in sys.path:
    for f in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcublas.so.1[0-9]")),
                    reverse=True):
        print(f)
PYEOF
); do
        [ -e "$f" ] && export RT_CUBLAS="$f" && break
    done
fi
printf '\ncuBLAS: %s\n' "${RT_CUBLAS:-found by the loader: $(ldconfig -p 2>/dev/null | grep -m1 'libcublas\.so' || echo none, the built-in kernel)}" >>"$REPORT"
run 30 "dynamic dependencies (must be libc/libm/pthread/dl only)" bash -c \
  'readelf -d runtime_py/libruntime.so | grep NEEDED; ! readelf -d runtime_py/libruntime.so | grep -i -E "cuda|cublas"' \
  || STATUS=1

run 60 "backend status" $PY -c 'import runtime_py as rt, runtime_py.cuda as c
print("available:", c.is_available(), "devices:", c.device_count(), c.unavailable_reason())
from runtime_py.compiler import ProgramBuilder
b = ProgramBuilder(); m = b.method("forward")
m.output(m.matmul(m.input("a", "float32", (64, 64)), m.input("b", "float32", (64, 64))))
with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
    f(bytearray(64 * 64 * 4), bytearray(64 * 64 * 4))
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libcublas" in l]
print("GEMM in this process (no torch loaded):", sorted(set(maps)) or "the built-in kernel")
print("torch:", end=" ")
try:
    import torch; print(torch.__version__, torch.cuda.is_available())
except ImportError:
    print("absent")' || STATUS=1

# ---- tests ----------------------------------------------------------------------------------
export RT_GPU_FULL_MODELS=1
run 240 "GPU tests (cuBLAS when installed)" $PY -m pytest tests/gpu -q -rs --tb=short \
  --durations=10 -p no:cacheprovider || STATUS=1
run 90 "GPU tests of the products on the built-in GEMM kernel (RT_CUBLAS=off)" \
  env RT_CUBLAS=off $PY -m pytest tests/gpu/test_cuda_ops.py -q --tb=short -p no:cacheprovider \
  -k "matmul or linear or conv2d or model" || STATUS=1
run 90 "CPU engine still works, no-GPU checks skip" $PY -m pytest -q -p no:cacheprovider \
  tests/test_engine.py tests/test_cuda_absent.py tests/test_ffi_cdef.py || STATUS=1

# ---- benchmark ------------------------------------------------------------------------------
run 180 "benchmark vs torch eager (benchmarks/gpu.py)" $PY benchmarks/gpu.py --quick \
  --out "$RESULTS/gpu_bench.md"

# ---- races and out-of-bounds accesses the emulator cannot see (informational) -----------------
if command -v compute-sanitizer >/dev/null && [ "${RT_GPU_SANITIZE:-1}" = 1 ]; then
  K="test_matmul or test_softmax or test_layer_norm or test_instance_and_group_norm or"
  K="$K (test_non_zero and float32) or (test_reductions and float32 and sum) or"
  K="$K (test_cumsum and float32) or (test_topk and float32) or (test_argmax_argmin and float32)"
  K="$K or test_average_pooling_over_large_windows"
  run 150 "compute-sanitizer racecheck: shared-memory kernels (built-in GEMM)" env RT_CUBLAS=off \
    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 \
    $PY -m pytest tests/gpu/test_cuda_ops.py -q -x -p no:cacheprovider -k \
    "test_matmul or test_softmax or test_layer_norm or test_instance_and_group_norm or (test_non_zero and float32) or (test_reductions and float32 and sum) or (test_cumsum and float32) or (test_topk and float32) or (test_argmax_argmin and float32)"
fi

printf '\nOverall test status: %s\n' "$([ $STATUS = 0 ] && echo PASS || echo FAIL)" >>"$REPORT"
cat "$REPORT"
exit $STATUS
