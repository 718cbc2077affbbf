"""The conformance sweep (runtime_py.onnx.conformance) records every outcome against its case
and says so in its exit status: a case that hangs is killed after the timeout and recorded as
hung, one that kills its process as crashed, wrong numbers as failed, a clean refusal as
unsupported; expanded function bodies are counted apart from the op. Fake cases stand in for
the ONNX suites here."""
from __future__ import annotations

import faulthandler
import os
import signal
import time

import pytest

np = pytest.importorskip("numpy")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from runtime_py.onnx import conformance  # noqa: E402


def _model(op: str):
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "y"], ["z"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "xy"],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class FakeCase:
    kind = "node"
    model_dir = None

    def __init__(self, name: str, op: str, offset: float = 0.0, behaviour: str = ""):
        self.name, self.model, self.behaviour = name, _model(op), behaviour
        x, y = np.arange(3, dtype=np.float32), np.full(3, 0.5, np.float32)
        self._data = [([x, y], [x + y + np.float32(offset)])]

    @property
    def data_sets(self):  # read only in the worker process, when the case runs
        if self.behaviour == "hang":
            time.sleep(3600)
        if self.behaviour == "crash":
            faulthandler.disable()  # pytest's, inherited by the worker: no traceback noise
            os.kill(os.getpid(), signal.SIGSEGV)
        return self._data


def fake_cases(suite: str):
    return [FakeCase("test_add", "Add"), FakeCase("test_add_wrong", "Add", offset=1.0),
            FakeCase("test_add_hangs", "Add", behaviour="hang"),
            FakeCase("test_add_crashes", "Add", behaviour="crash"),
            FakeCase("test_add_after_them", "Add"),
            FakeCase("test_nosuchop", "NoSuchOp"),
            FakeCase("test_add_expanded", "Add")]


def test_every_outcome_is_recorded_against_its_case():
    started = time.monotonic()
    records = conformance.sweep("node", jobs=2, timeout=3.0, loader=fake_cases)
    assert time.monotonic() - started < 60
    status = {r["name"]: r["status"] for r in records}
    assert status == {"test_add": "passed", "test_add_wrong": "failed",
                      "test_add_hangs": "hung", "test_add_crashes": "crashed",
                      "test_add_after_them": "passed", "test_nosuchop": "unsupported",
                      "test_add_expanded": "passed"}
    detail = {r["name"]: r["detail"] for r in records}
    assert detail["test_add_hangs"].startswith("no result after 3 s")
    assert "signal 11" in detail["test_add_crashes"]
    assert "values differ" in detail["test_add_wrong"]
    assert [r["name"] for r in records if r["expanded"]] == ["test_add_expanded"]


def test_expanded_cases_are_tabled_apart_from_the_op():
    records = [{"name": "test_x", "op": "Attention", "expanded": False,
                "status": "unsupported", "detail": "node 'n' (Attention): not supported"},
               {"name": "test_x_expanded", "op": "Attention", "expanded": True,
                "status": "passed", "detail": ""}]
    text = conformance.report("node", records)
    native, expanded = text.split("expanded function bodies")
    assert "| Attention | 0 | 0 | 1 | 0 | 0 | not supported |" in native
    assert "| Attention | 1 | 0 | 0 | 0 | 0 |  |" in expanded


def test_the_exit_status_reports_bad_cases(capsys):
    assert conformance.main(["--timeout", "3"], loader=fake_cases) == 1
    assert "1 crashed, 1 failed, 1 hung" in capsys.readouterr().err
    assert conformance.main(["--timeout", "3", "--allow-failures"], loader=fake_cases) == 0
    good = lambda suite: [FakeCase("test_add", "Add"), FakeCase("test_nosuchop", "NoSuchOp")]
    assert conformance.main([], loader=good) == 0
