#!/usr/bin/env python3
"""Build the libFuzzer harness (tests/fuzz/fuzz_program.c) with ASan + UBSan and run it.

    python3 tests/fuzz/run.py --seconds 600         # fuzz for 10 minutes
    python3 tests/fuzz/run.py --seconds 3600 --fork 2   # keep going after crashes, 2 workers
    python3 tests/fuzz/run.py --replay               # run the seeds and regressions once
    python3 tests/fuzz/run.py --valgrind             # memcheck over seeds, regressions, corpus

Everything lives in build/fuzz/: the binary, the seed corpus generated from the builder's
programs (seeds/), the growing corpus (corpus/) and crash artifacts (artifacts/). A crashing
input belongs in tests/fuzz/regressions/ once fixed (tests/test_fuzz_regressions.py loads
each one through the Python API). Needs clang with libFuzzer (Debian: clang-14
libclang-rt-14-dev).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "fuzz"
HARNESS = ROOT / "tests" / "fuzz" / "fuzz_program.c"
REGRESSIONS = ROOT / "tests" / "fuzz" / "regressions"
# RT_NO_MULTIVERSION: clang 14 leaves calls between translation units to target_clones
# functions (core/multiversion.h) unresolved at link time; the fuzzer needs no AVX2 clones.
COMPILE_FLAGS = ["-g", "-O1", "-fno-omit-frame-pointer", "-std=c11", "-D_DEFAULT_SOURCE",
                 "-DRT_NO_MULTIVERSION", "-fsanitize=fuzzer-no-link,address,undefined",
                 "-fno-sanitize-recover=undefined",
                 f"-I{ROOT / 'include'}", f"-I{ROOT / 'libruntime'}"]
LINK_FLAGS = ["-fsanitize=fuzzer,address,undefined", "-lm", "-lpthread"]
# The depthwise kernels inline and unroll hundreds of vector operations per block: with ASan
# and UBSan at -O1, clang 14 spent 18 minutes on that one file (its block-frequency analysis
# over the checks' branches; 3 with ASan alone, 6 with UBSan alone). At -O0, with every
# check kept, it takes 11 seconds, and the fuzzer's small planes do not miss the speed.
#
# The arithmetic kernels are built without the fuzzer's comparison tracing (it keeps its
# edge counters there): a corpus soon holds large convolutions, and tracing every compare of
# their loops held the fuzzer to 16 inputs a second, most of it in the Winograd transforms.
# Comparisons that decide what a program means (reader, validation, shapes) are traced still.
KERNEL_FILES = [f"libruntime/ops/conv/kernels/{name}_f32.c"
                for name in ("winograd", "direct", "pixels", "padded")] + \
               [f"libruntime/ops/matmul/gemm/{name}.c"
                for name in ("gemm", "gemm_avx2", "gemm_avx512", "gemm_portable")]
PER_FILE_FLAGS = {"libruntime/ops/conv/kernels/depthwise_f32.c":
                  ["-O0", "-fno-sanitize-coverage=trace-cmp"],
                  **{f: ["-fno-sanitize-coverage=trace-cmp"] for f in KERNEL_FILES}}


def find_clang() -> str:
    for name in ("clang", "clang-14", "clang-15", "clang-16", "clang-17", "clang-18"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("run.py: clang not found (apt-get install -y clang-14 libclang-rt-14-dev)")


def sources() -> list:
    return sorted(p for p in (ROOT / "libruntime").rglob("*.c"))


def compile_object(source: Path, headers_time: float) -> Path:
    """One instrumented object under build/fuzz/obj/, rebuilt when its source, any header or
    this script is newer."""
    relative = source.relative_to(ROOT)
    obj = OUT / "obj" / relative.with_suffix(".o")
    if obj.exists() and obj.stat().st_mtime >= max(source.stat().st_mtime, headers_time):
        return obj
    obj.parent.mkdir(parents=True, exist_ok=True)
    extra = PER_FILE_FLAGS.get(relative.as_posix(), [])
    subprocess.check_call([find_clang(), *COMPILE_FLAGS, *extra, "-c", str(source),
                           "-o", str(obj)])
    return obj


def build_harness() -> Path:
    """Compile the library's sources and the harness, one object per source on every core
    (objects are kept and reused while newer than their source and every header), and link
    them into one instrumented binary."""
    OUT.mkdir(parents=True, exist_ok=True)
    binary = OUT / "fuzz_program"
    headers = [ROOT / "include" / "runtime.h"] + sorted((ROOT / "libruntime").rglob("*.h")) + \
        sorted((ROOT / "libruntime").rglob("*.inc"))
    # This file holds the flags: a change to it rebuilds every object, as a header's does.
    headers_time = max(p.stat().st_mtime for p in headers + [Path(__file__)])
    units = sources() + [HARNESS]
    if binary.exists() and binary.stat().st_mtime >= max(
            headers_time, max(p.stat().st_mtime for p in units)):
        return binary
    print("run.py: building", binary.relative_to(ROOT), flush=True)
    # The slowest files first, so they do not start last.
    units.sort(key=lambda p: -p.stat().st_size)
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        objects = list(pool.map(lambda p: compile_object(p, headers_time), units))
    subprocess.check_call([find_clang(), "-o", str(binary), *map(str, objects), *LINK_FLAGS])
    return binary


def build_leak_check() -> Path:
    """The same harness as an ordinary binary (gcc, no sanitizers) for valgrind."""
    OUT.mkdir(parents=True, exist_ok=True)
    binary = OUT / "leak_check"
    cmd = [shutil.which("gcc") or "cc", "-g", "-O1", "-std=c11", "-D_DEFAULT_SOURCE",
           f"-I{ROOT / 'include'}", f"-I{ROOT / 'libruntime'}", "-o", str(binary),
           str(ROOT / "tests" / "fuzz" / "leak_check.c"), str(HARNESS),
           *[str(s) for s in sources()], "-lm", "-lpthread"]
    subprocess.check_call(cmd)
    return binary


def valgrind(files: list) -> int:
    """memcheck over `files`; fails on any memory error or definitely lost block."""
    tool = shutil.which("valgrind")
    if tool is None:
        raise SystemExit("run.py: valgrind not found (apt-get install -y valgrind)")
    binary = build_leak_check()
    listing = OUT / "leak_check.files"
    listing.write_text("".join(f"{f}\n" for f in files))
    cmd = [tool, "--leak-check=full", "--errors-for-leak-kinds=definite",
           "--error-exitcode=99", str(binary), f"@{listing}"]
    print(f"run.py: valgrind over {len(files)} files", flush=True)
    return subprocess.call(cmd)


def write_seeds() -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.fuzz.seeds import seed_data_files, seed_programs

    seeds = OUT / "seeds"
    seeds.mkdir(parents=True, exist_ok=True)
    for name, data in seed_programs().items():
        (seeds / f"{name}.rtp").write_bytes(data)
    for name, data in seed_data_files().items():
        (seeds / name).write_bytes(data)
    return seeds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time (default 60)")
    parser.add_argument("--fork", type=int, default=0,
                        help="libFuzzer fork mode with this many workers; continues after "
                             "crashes, collecting them in build/fuzz/artifacts")
    parser.add_argument("--timeout", type=int, default=10, help="seconds per input (hang)")
    parser.add_argument("--replay", action="store_true",
                        help="run the seeds and regression files once each, then exit")
    parser.add_argument("--valgrind", action="store_true",
                        help="build a plain driver and run valgrind memcheck over the seeds, "
                             "the regressions and the corpus")
    parser.add_argument("--max-files", type=int, default=0,
                        help="with --valgrind: at most this many corpus files (0: all)")
    parser.add_argument("extra", nargs="*", help="more libFuzzer flags, e.g. -seed=1")
    args = parser.parse_args()

    seeds = write_seeds()
    regressions = sorted(p for p in REGRESSIONS.glob("*") if p.is_file() and p.suffix != ".md")
    if args.valgrind:
        corpus = sorted((OUT / "corpus").glob("*"))
        if args.max_files:
            corpus = corpus[:args.max_files]
        return valgrind(sorted(seeds.iterdir()) + regressions + corpus)
    binary = build_harness()
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    if args.replay:
        files = sorted(seeds.iterdir()) + regressions
        cmd = [str(binary), f"-timeout={args.timeout}", *args.extra, *map(str, files)]
        return subprocess.call(cmd, env=env)
    corpus = OUT / "corpus"
    artifacts = OUT / "artifacts"
    corpus.mkdir(exist_ok=True)
    artifacts.mkdir(exist_ok=True)
    cmd = [str(binary), str(corpus), str(seeds), str(REGRESSIONS),
           f"-dict={ROOT / 'tests' / 'fuzz' / 'program.dict'}",
           "-max_len=65536", f"-timeout={args.timeout}", f"-max_total_time={args.seconds}",
           "-rss_limit_mb=4096", "-malloc_limit_mb=1024", "-print_final_stats=1",
           f"-artifact_prefix={artifacts}/"]
    if args.fork:
        cmd += [f"-fork={args.fork}", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    cmd += args.extra
    print("run.py:", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
