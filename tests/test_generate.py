"""Generation with the KV cache kept in the program (runtime_py.onnx kv_cache): the tiny Llama
of tests/data/generate, exported with its cache as inputs and outputs, converted once; greedy
tokens from prefill and decode steps against torch eager's (stored by
scripts/export_llama_generate.py) and the logits of every step against onnxruntime running the
exported model with its own cache; the cache's bounds, reset and errors."""
from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

import runtime_py as rt  # noqa: E402
import runtime_py.onnx as ro  # noqa: E402
from runtime_py.onnx.generate import greedy, reset  # noqa: E402

DATA = Path(__file__).parent / "data" / "generate"
MODEL = str(DATA / "llama.onnx")
MAX = 64


def convert(max_length=MAX, **extra):
    return ro.convert(MODEL, input_shapes={"input_ids": (1, 32), "attention_mask": (1, MAX)},
                      dynamic_bounds={"input_ids": {1: 32}, "attention_mask": {1: MAX}},
                      kv_cache={"max_length": max_length, **extra})


@pytest.fixture(scope="module")
def method():
    with rt.Program.load(convert()) as p, p.load_method("forward") as f:
        yield f


def test_the_program_keeps_the_cache_and_fuses_attention():
    with rt.Program.load(convert()) as p, p.load_method("forward") as f:
        meta = f.method_meta
        assert [i.name for i in meta.inputs] == ["input_ids", "attention_mask"]
        assert [o.name for o in meta.outputs] == ["logits"]
        assert sorted(a.name for a in meta.attributes) == sorted(
            ["kv_cache_length"] + [f"kv_cache.past_{kv}_{i}" for i in range(2)
                                   for kv in ("key", "value")])
        assert meta.attribute_meta("kv_cache.past_key_0").shape == (1, 2, MAX, 16)
        ops = collections.Counter(op for op in p.instruction_ops("forward") if op)
    assert ops["attention"] == 2 and ops["softmax"] == 0 and ops["copy_into"] == 4
    assert ops["concat"] <= 6 and ops["expand"] <= 1  # no cache concat, no repeat_kv copies


@pytest.mark.parametrize("case", [0, 1])
def test_greedy_tokens_match_torch(method, case):
    with np.load(DATA / "reference.npz") as ref:
        prompt, want = ref[f"prompt{case}"], ref[f"tokens{case}"]
    assert greedy(method, prompt, len(want)) == want.tolist()


def test_every_step_matches_onnxruntime_with_its_own_cache(method):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    past = {i.name: np.zeros((1, 2, 0, 16), np.float32) for i in session.get_inputs()
            if i.name.startswith("past")}
    rng = np.random.default_rng(3)
    reset(method)
    total = 0
    for length in (5, 1, 1, 3, 1, 1):  # a prompt, decode steps, a chunk, more steps
        ids = rng.integers(0, 256, (1, length)).astype(np.int64)
        total += length
        mask = np.ones((1, total), np.int64)
        outs = dict(zip(names, session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                  **past})))
        past = {k: outs[k.replace("past", "present")] for k in past}
        got = np.asarray(method(ids, mask)[0])
        np.testing.assert_allclose(got, outs["logits"], rtol=1e-4, atol=1e-4)
    assert np.asarray(method.get_attribute("kv_cache_length")).tolist() == [total]


def test_a_full_cache_fails_the_call_and_keeps_the_method():
    with rt.Program.load(convert(max_length=8)) as p, p.load_method("forward") as f:
        ids = np.zeros((1, 6), np.int64)
        f(ids, np.ones((1, 6), np.int64))
        with pytest.raises(rt.InvalidArgument, match=r"copy_into\).*does not fit axis 2 of out, "
                                                      r"of size 8"):
            f(ids[:, :3], np.ones((1, 9), np.int64))
        assert np.asarray(f.get_attribute("kv_cache_length")).tolist() == [6]
        f(ids[:, :2], np.ones((1, 8), np.int64))  # what still fits
        reset(f)
        assert np.asarray(f.get_attribute("kv_cache_length")).tolist() == [0]


@pytest.mark.parametrize("options,text", [
    ({}, "kv_cache needs max_length"),
    ({"max_length": 0}, "must be > 0"),
    ({"max_length": 8, "window": 2}, "unknown option"),
])
def test_bad_options_are_refused(options, text):
    with pytest.raises(rt.InvalidArgument, match=text):
        ro.convert(MODEL, input_shapes={"input_ids": (1, 4), "attention_mask": (1, 8)},
                   kv_cache=options)


def test_a_model_without_a_cache_is_refused():
    with pytest.raises(rt.InvalidArgument, match="no KV cache"):
        ro.convert(str(DATA.parent / "dynamic" / "bert_classic.onnx"),
                   input_shapes={"input_ids": (1, 4), "attention_mask": (1, 4),
                                 "token_type_ids": (1, 4)}, kv_cache={"max_length": 8})


def test_a_cache_read_other_than_by_attention_is_refused():
    """The dynamo export computes K^T through a reshape to 3-D: refused, naming the node."""
    with pytest.raises(ro.ConversionError, match=r"node 'node_Reshape_148' \(Reshape\): "
                                                 r"kv_cache: a reshape of the cache"):
        ro.convert(str(DATA.parent / "dynamic" / "llama_decode_dynamo.onnx"),
                   input_shapes={"input_ids": (1, 1), "attention_mask": (1, 16)},
                   dynamic_bounds={"attention_mask": {1: 16}}, kv_cache={"max_length": 16})
