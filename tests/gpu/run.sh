#!/usr/bin/env bash
# tests/gpu/run.sh: the whole GPU check on a machine with an NVIDIA GPU, in a few minutes.
#
#   tests/gpu/run.sh [RESULTS_DIR]        (default: $OUT if set, else ./gpu-results)
#
# Builds libruntime with its CUDA kernels (nvcc from PATH or /usr/local/cuda/bin), checks that it
# still links nothing of CUDA's, runs the GPU tests (cuBLAS and the built-in GEMM kernel), the
# CPU engine tests and the GPU benchmark against torch eager. Python packages missing from the
# machine are installed with pip when it can reach an index; steps whose packages are missing
# skip. Everything goes to RESULTS_DIR/gpu_check.md; the exit status is that of the tests.
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
  nvcc --version | tail -2; '"$PY"' --version; cmake --version | head -1; git log --oneline -1'

# ---- build ----------------------------------------------------------------------------------
BUILD=build/gpu-check
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if command -v cmake >/dev/null; then
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
      libruntime/ops/gemm/*.c libruntime/backends/cuda/*.c libruntime/backends/cuda/fatbin.S \
      -Wl,--no-undefined -lpthread -lm -ldl -o $BUILD/libruntime.so; } >'$RESULTS/build.log' 2>&1 \
    && cp $BUILD/libruntime.so runtime_py/libruntime.so \
    && ls -l $BUILD/rt_cuda_kernels.fatbin runtime_py/libruntime.so" || STATUS=1
fi

# cuBLAS: the library's own search (ld.so paths) first; else the toolkit's or a pip wheel's.
if [ -z "${RT_CUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
    for f in /usr/local/cuda/lib64/libcublas.so.1[0-9] \
             $($PY -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null)/libcublas.so.1[0-9]; do
        [ -e "$f" ] && export RT_CUBLAS="$f" && break
    done
fi
printf '\ncuBLAS: %s\n' "${RT_CUBLAS:-found by the loader: $(ldconfig -p 2>/dev/null | grep -m1 'libcublas\.so' || echo none, the built-in kernel)}" >>"$REPORT"
run 30 "dynamic dependencies (must be libc/libm/pthread/dl only)" bash -c \
  'readelf -d runtime_py/libruntime.so | grep NEEDED; ! readelf -d runtime_py/libruntime.so | grep -i -E "cuda|cublas"' \
  || STATUS=1

# ---- python packages --------------------------------------------------------------------------
missing=$($PY - <<'PYEOF'
import importlib
print(" ".join(m for m in ("cffi", "numpy", "pytest", "hypothesis", "onnx")
               if importlib.util.find_spec(m) is None))
PYEOF
)
if [ -n "$missing" ]; then
    run 60 "pip install $missing" $PY -m pip install -q --retries 0 --timeout 10 $missing
fi
run 60 "backend status" $PY -c 'import runtime_py.cuda as c; print("available:", c.is_available(),
  "devices:", c.device_count(), c.unavailable_reason())
from runtime_py._ffi import get_lib
print("torch:", end=" ")
try:
    import torch; print(torch.__version__, torch.cuda.is_available())
except ImportError:
    print("absent")' || STATUS=1

# ---- tests ----------------------------------------------------------------------------------
export RT_GPU_FULL_MODELS=1
run 180 "GPU tests (cuBLAS when installed)" $PY -m pytest tests/gpu -q -rs -p no:cacheprovider \
  || STATUS=1
run 90 "GPU tests of the products on the built-in GEMM kernel (RT_CUBLAS=off)" \
  env RT_CUBLAS=off $PY -m pytest tests/gpu/test_cuda_ops.py -q -p no:cacheprovider \
  -k "matmul or linear or conv2d or model" || STATUS=1
run 90 "CPU engine still works, no-GPU checks skip" $PY -m pytest -q -p no:cacheprovider \
  tests/test_engine.py tests/test_cuda_absent.py tests/test_ffi_cdef.py || STATUS=1

# ---- benchmark ------------------------------------------------------------------------------
run 180 "benchmark vs torch eager (benchmarks/gpu.py)" $PY benchmarks/gpu.py --quick \
  --out "$RESULTS/gpu_bench.md"

printf '\nOverall test status: %s\n' "$([ $STATUS = 0 ] && echo PASS || echo FAIL)" >>"$REPORT"
cat "$REPORT"
exit $STATUS
