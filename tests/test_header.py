"""include/runtime.h compiles on its own, as strict C11 and as C++."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HEADER = Path(__file__).resolve().parents[1] / "include" / "runtime.h"


@pytest.mark.parametrize("compiler,args", [
    ("cc", ["-x", "c", "-std=c11"]),
    ("c++", ["-x", "c++", "-std=c++11"]),
])
def test_header_compiles_standalone(compiler, args, tmp_path):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    source = tmp_path / "use.c"
    source.write_text('#include "runtime.h"\nint main(void) { return (int)rt_abi_version() - RT_ABI_VERSION; }\n')
    subprocess.run([compiler, *args, "-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only",
                    f"-I{HEADER.parent}", str(source)], check=True)


def test_library_exports_only_the_abi():
    """Every exported symbol is declared in the header, prefixed rt_."""
    lib = Path(__file__).resolve().parents[1] / "runtime_py" / "libruntime.so"
    if shutil.which("nm") is None or not lib.exists():
        pytest.skip("needs nm and the built library")
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True,
                         capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if " T " in line}
    text = HEADER.read_text()
    assert exported and all(name.startswith("rt_") for name in exported), exported
    missing = [name for name in exported if f"{name}(" not in text]
    assert not missing, f"exported but not in the header: {missing}"


def test_library_links_only_libc_libm_pthread():
    lib = Path(__file__).resolve().parents[1] / "runtime_py" / "libruntime.so"
    if shutil.which("readelf") is None or not lib.exists():
        pytest.skip("needs readelf and the built library")
    out = subprocess.run(["readelf", "-d", str(lib)], check=True, capture_output=True, text=True).stdout
    needed = {line.split("[")[1].split("]")[0] for line in out.splitlines() if "(NEEDED)" in line}
    allowed = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2"}
    # The dynamic loader itself appears for thread-local storage (__tls_get_addr).
    assert {n for n in needed if not n.startswith("ld-linux")} <= allowed, needed
