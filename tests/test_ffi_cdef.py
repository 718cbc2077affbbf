"""runtime_py._ffi.CDEF must be the BEGIN/END CDEF block of include/runtime.h, and every RT_API
function must be declared there and exported by the library (ABI mode has no compiler to
catch drift: a mismatch would crash instead of failing to build)."""
import os
import re

import pytest

from runtime_py import _ffi

pytestmark = pytest.mark.core  # the quick subset every interpreter runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "include", "runtime.h")


def _header() -> str:
    with open(HEADER, encoding="utf-8") as f:
        return f.read()


def _cdef_block(text: str) -> str:
    match = re.search(r"/\* BEGIN CDEF \*/\n(.*?)/\* END CDEF \*/", text, re.S)
    assert match, "include/runtime.h has no BEGIN CDEF / END CDEF block"
    return match.group(1)


def _normalize(text: str) -> str:
    return " ".join(text.split())


def _api_functions(text: str) -> list:
    return re.findall(r"\bRT_API\b[^;{]*?\b(rt_\w+)\s*\(", text)


def test_cdef_matches_header():
    assert _normalize(_ffi.CDEF) == _normalize(_cdef_block(_header()))


def test_header_block_has_no_preprocessor_logic():
    block = _cdef_block(_header())
    directives = re.findall(r"^\s*#\s*(\w+)", block, re.M)
    assert set(directives) <= {"define"}, directives


def test_every_api_function_is_declared():
    names = _api_functions(_header())
    assert len(names) > 20
    declared = set(_api_functions(_ffi.CDEF))
    missing = [name for name in names if name not in declared]
    assert not missing, missing
    parsed = getattr(getattr(_ffi.ffi, "_parser", None), "_declarations", None)
    if parsed is not None:  # what cffi itself parsed (a private table; checked when present)
        unparsed = [name for name in names if f"function {name}" not in parsed]
        assert not unparsed, unparsed


def test_abi_version_constant():
    assert _ffi.ABI_VERSION == int(re.search(r"#define RT_ABI_VERSION (\d+)", _header()).group(1))


def _library_or_skip():
    packaged = os.path.join(os.path.dirname(_ffi.__file__), "libruntime.so")
    if not os.environ.get("RUNTIME_PY_LIBRARY") and not os.path.exists(packaged):
        pytest.skip("libruntime is not built (python3 build.py)")
    return _ffi.get_lib()


def test_every_api_function_resolves_in_library():
    lib = _library_or_skip()
    missing = []
    for name in _api_functions(_header()):
        try:
            getattr(lib, name)
        except AttributeError:
            missing.append(name)
    assert not missing, f"declared but not exported by {_ffi.library_path()}: {missing}"
    assert lib.rt_abi_version() == _ffi.ABI_VERSION
