"""runtime_py.load() on a model of another format converts it, says so in the log, and with
cache=True keeps the converted program beside the model and reuses it while it is fresh."""
from __future__ import annotations

import logging
import os

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("onnx")

import runtime_py as rt  # noqa: E402
from tests import onnx_models  # noqa: E402


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(onnx_models.mlp(batch=2).SerializeToString())
    return path


def _forward(module, x):
    (y,) = module.forward(x)
    return np.asarray(y)


def test_loading_a_model_converts_it_and_says_so(model_file, caplog):
    x = np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="runtime_py"):
        with rt.load(model_file) as module:
            y = _forward(module, x)
    assert any("converting" in r.getMessage() and str(model_file) in r.getMessage()
               for r in caplog.records)
    assert not os.path.exists(str(model_file) + ".rtp")  # nothing written unless asked
    with rt.Program.load(rt.onnx.convert(str(model_file))) as p, p.load_method() as f:
        np.testing.assert_array_equal(y, np.asarray(f(x)[0]))


def test_cache_writes_the_program_beside_the_model_and_reuses_it_while_fresh(model_file,
                                                                             caplog):
    cached = str(model_file) + ".rtp"
    x = np.random.default_rng(1).standard_normal((2, 256)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="runtime_py"):
        with rt.load(model_file, cache=True) as module:
            first = _forward(module, x)
        assert os.path.exists(cached)
        assert tuple(rt.Program.load(cached).method_names) == ("forward",)
        caplog.clear()
        with rt.load(model_file, cache=True) as module:
            np.testing.assert_array_equal(_forward(module, x), first)
        assert [r.getMessage() for r in caplog.records if "using the converted" in
                r.getMessage()]
        # A model newer than its cache is converted again.
        stamp = os.stat(model_file).st_mtime_ns - 10**10
        os.utime(cached, ns=(stamp, stamp))
        caplog.clear()
        with rt.load(model_file, cache=True) as module:
            np.testing.assert_array_equal(_forward(module, x), first)
        assert any("converting" in r.getMessage() for r in caplog.records)
    assert os.stat(cached).st_mtime_ns >= os.stat(model_file).st_mtime_ns
    assert sorted(os.listdir(model_file.parent)) == ["mlp.onnx", "mlp.onnx.rtp"]  # no temp
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(cached).st_mode & 0o777 == 0o666 & ~umask  # as a plain open() makes it


def test_cache_needs_a_file(model_file):
    with pytest.raises(TypeError, match=r"cache=True\) needs a model file"):
        rt.load(model_file.read_bytes(), cache=True)
