#!/usr/bin/env python3
"""Build libruntime with CMake and Ninja and place the library inside runtime_py/.

    python build.py                 # Release, optimised
    python build.py --sanitize address   # ASan + UBSan build (into build/asan)
    python build.py --debug

CMake and Ninja are taken from PATH, or installed from PyPI into the running Python when
missing, so a fresh machine needs only Python and a C compiler.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "runtime_py"


def find_tool(name: str) -> str:
    """Path of cmake or ninja, installing the PyPI package when neither PATH nor the
    interpreter's scripts directory has it."""
    found = shutil.which(name)
    if found:
        return found
    scripts = Path(sys.executable).parent
    candidate = scripts / name
    if candidate.exists():
        return str(candidate)
    print(f"build.py: {name} not found; installing it from PyPI", flush=True)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", name])
    found = shutil.which(name) or (str(candidate) if candidate.exists() else None)
    if not found:
        raise SystemExit(f"build.py: could not find {name} after installing it")
    return found


def build(build_type: str, sanitize: str, build_dir: Path, place: bool) -> Path:
    cmake = find_tool("cmake")
    ninja = find_tool("ninja")
    configure = [
        cmake, "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja}", f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DRT_SANITIZE={sanitize}",
    ]
    subprocess.check_call(configure, stdout=subprocess.DEVNULL)
    subprocess.check_call([cmake, "--build", str(build_dir)])
    library = build_dir / "libruntime.so"
    if place:
        target = PACKAGE / "libruntime.so"
        tmp = target.with_suffix(".so.tmp")
        shutil.copy2(library, tmp)
        os.replace(tmp, target)  # atomic: a running process keeps its old mapping
        print(f"build.py: placed {target.relative_to(ROOT)}")
    return library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="Debug build without -O3")
    parser.add_argument("--sanitize", choices=["address", "thread"], default="",
                        help="sanitizer build, kept in build/<name> and not placed in the package")
    args = parser.parse_args()
    build_type = "Debug" if args.debug else "Release"
    if args.sanitize:
        library = build("Debug", args.sanitize, ROOT / "build" / args.sanitize, place=False)
        print(f"build.py: sanitizer build at {library.relative_to(ROOT)}; run with "
              f"RUNTIME_PY_LIBRARY={library.relative_to(ROOT)}")
    else:
        build(build_type, "", ROOT / "build" / build_type.lower(), place=True)


if __name__ == "__main__":
    main()
