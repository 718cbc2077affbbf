"""Export tiny Hugging Face models to ONNX with dynamic axes: the fixtures in tests/data/dynamic/.

Why: the runtime's ONNX importer has to handle symbolic dimensions (a `dim_param` such as
"batch" or "seq" instead of a number) the way real exported transformer models use them:
shape arithmetic on Shape/Gather/Concat/Range, causal masks built from the sequence length,
RoPE tables sliced to it, a KV cache whose length grows. These fixtures are small real
models exported by both torch exporters, so the tests can run them at several shapes and
compare with onnxruntime's answers, without torch, transformers or hub access.

What it makes, for each family (gpt2, llama, bert, vit, whisper_encoder, t5_encoder,
wav2vec2, llama_decode) and each exporter (classic TorchScript `dynamo=False`, and
`dynamo=True`):

    {family}_{exporter}.onnx  one self-contained file (weights embedded, no external data)
    {family}_{exporter}.npz   inputs and onnxruntime (CPUExecutionProvider) outputs at three
                              shapes: `case{k}_in_{input_name}` and `case{k}_out_{i}`, k = 0..2,
                              outputs in graph order
    manifest.json             a list, one entry per family and exporter: "file", "family",
                              "exporter", "inputs" {name: {"dtype", "dynamic_axes": {axis:
                              dim_param}}} and "shapes" {name: [dim_param or size]} as read
                              back from the exported graph, "bounds" {name: {axis: max}}
                              (suggested upper bounds of the dynamic axes), "opset", "cases"
                              (3) and "max_err_vs_torch" (largest |onnxruntime - torch eager|
                              over all cases and outputs); or, where the export or the check
                              failed, "error" with the message instead of the files

Exports use the models' default attention (sdpa), opset 17 for the classic exporter and the
dynamo exporter's default (20 with torch 2.13). The dynamo exporter's per-node metadata
(stack traces holding this machine's paths) is dropped; nothing else is changed.

The models are built from tiny configs with random weights (`torch.manual_seed(0)`); inputs
come from a NumPy generator seeded per family and case, so a rerun writes the same data.
Each family and exporter is exported in its own subprocess, so one failure or crash does not
stop the others.

Needs torch, transformers, onnx, onnxruntime and onnxscript (the runtime and its tests import
none of them; `pip install torch transformers onnx onnxruntime onnxscript` in a separate venv):

    python scripts/export_dynamic_onnx.py [--out tests/data/dynamic] [--only gpt2,bert]

With --only, the other families' entries already in manifest.json are kept.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "data", "dynamic")
EXPORTERS = ("classic", "dynamo")
CLASSIC_OPSET = 17
TOLERANCE = 1e-4          # largest accepted |onnxruntime - torch eager|
WORKER_TIMEOUT_S = 600    # per family and exporter

# Suggested upper bounds for the dynamic axes (also the torch.export Dim maxima).
MAX_BATCH = 4
MAX_SEQ = 32
MAX_POSITIONS = 64        # position tables of the text models; MAX_SEQ (+ past) stays below


@dataclass
class Family:
    """One model to export and how to feed it.

    `model` takes the inputs positionally in `inputs` order and returns a tuple of tensors
    in `outputs` order. `make_inputs(batch, length, rng)` gives the torch inputs for one case;
    `length` is the family's varying length (tokens, samples, past length) and is ignored
    where only the batch varies. Axes are {axis: name}; `bounds` are {input: {axis: max}}.
    """

    model: object
    inputs: dict[str, dict[int, str]]
    outputs: dict[str, dict[int, str]]
    make_inputs: Callable
    bounds: dict[str, dict[int, int]]
    export_shape: tuple[int, int] = (2, 8)
    cases: tuple[tuple[int, int], ...] = ((1, 5), (2, 9), (3, 16))
    derived: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    """Axes that are another axis plus a constant, {input: {axis: (name, offset)}}: for
    torch.export, which needs them written as `Dim + offset`."""


# --------------------------------------------------------------------------- helpers

def _seq_inputs(vocab: int, *, mask: bool = False, token_types: bool = False):
    """make_inputs for token models: random ids, and a right-padded attention mask where the
    last row of a batch > 1 has its last few tokens masked (no row is fully masked)."""

    def make(batch: int, seq: int, rng: np.random.Generator) -> dict:
        out = {"input_ids": torch.from_numpy(rng.integers(0, vocab, (batch, seq), dtype=np.int64))}
        if mask:
            m = np.ones((batch, seq), dtype=np.int64)
            if batch > 1:
                m[-1, seq - max(1, seq // 3):] = 0
            out["attention_mask"] = torch.from_numpy(m)
        if token_types:
            t = np.zeros((batch, seq), dtype=np.int64)
            t[:, seq // 2:] = 1
            out["token_type_ids"] = torch.from_numpy(t)
        return out
    return make


class HFOutputs(torch.nn.Module):
    """Wraps a Hugging Face model: inputs positional in `input_names` order, output the
    tuple of the named fields of its output; `fixed` are extra keyword arguments."""

    def __init__(self, model, input_names, output_names, **fixed):
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.fixed = fixed

    def forward(self, *args):
        out = self.model(**dict(zip(self.input_names, args)), **self.fixed)
        return tuple(out[name] for name in self.output_names)


def _wrap(model, inputs: dict, outputs: dict, **fixed) -> HFOutputs:
    return HFOutputs(model, inputs, outputs, **fixed).eval()


BATCH = {0: "batch"}
BATCH_SEQ = {0: "batch", 1: "seq"}


def _text_bounds(names) -> dict:
    return {name: {0: MAX_BATCH, 1: MAX_SEQ} for name in names}


# --------------------------------------------------------------------------- families

def gpt2() -> Family:
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=256, n_positions=MAX_POSITIONS, n_embd=32, n_layer=2,
                        n_head=2, use_cache=False)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"logits": BATCH_SEQ}
    return Family(_wrap(GPT2LMHeadModel(config), inputs, outputs, use_cache=False),
                  inputs, outputs, _seq_inputs(256, mask=True), _text_bounds(inputs))


def _llama_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=MAX_POSITIONS, rope_theta=10000.0,
                       tie_word_embeddings=False, use_cache=False)


def llama() -> Family:
    from transformers import LlamaForCausalLM
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"logits": BATCH_SEQ}
    return Family(_wrap(LlamaForCausalLM(_llama_config()), inputs, outputs, use_cache=False),
                  inputs, outputs, _seq_inputs(256, mask=True), _text_bounds(inputs))


def bert() -> Family:
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=MAX_POSITIONS, type_vocab_size=2)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ, "token_type_ids": BATCH_SEQ}
    outputs = {"last_hidden_state": BATCH_SEQ, "pooler_output": BATCH}
    return Family(_wrap(BertModel(config), inputs, outputs), inputs, outputs,
                  _seq_inputs(256, mask=True, token_types=True), _text_bounds(inputs))


def vit() -> Family:
    from transformers import ViTConfig, ViTModel
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    inputs = {"pixel_values": BATCH}
    outputs = {"last_hidden_state": BATCH, "pooler_output": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
        return {"pixel_values": torch.from_numpy(x)}
    return Family(_wrap(ViTModel(config), inputs, outputs), inputs, outputs, make,
                  {"pixel_values": {0: MAX_BATCH}})


def whisper_encoder() -> Family:
    """The encoder refuses any frame count but 2 * max_source_positions, so only the batch
    is dynamic."""
    from transformers import WhisperConfig, WhisperModel
    config = WhisperConfig(vocab_size=256, num_mel_bins=16, d_model=32, encoder_layers=2,
                           encoder_attention_heads=2, encoder_ffn_dim=64, decoder_layers=1,
                           decoder_attention_heads=2, decoder_ffn_dim=64,
                           max_source_positions=16, max_target_positions=16,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           decoder_start_token_id=1)
    encoder = WhisperModel(config).get_encoder()
    frames = 2 * config.max_source_positions
    inputs = {"input_features": BATCH}
    outputs = {"last_hidden_state": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, config.num_mel_bins, frames), dtype=np.float32)
        return {"input_features": torch.from_numpy(x)}
    return Family(_wrap(encoder, inputs, outputs), inputs, outputs, make,
                  {"input_features": {0: MAX_BATCH}})


def t5_encoder() -> Family:
    from transformers import T5Config, T5EncoderModel
    config = T5Config(vocab_size=256, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                      num_heads=2, relative_attention_num_buckets=16,
                      relative_attention_max_distance=32)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"last_hidden_state": BATCH_SEQ}
    return Family(_wrap(T5EncoderModel(config), inputs, outputs), inputs, outputs,
                  _seq_inputs(256, mask=True), _text_bounds(inputs))


def wav2vec2() -> Family:
    """Feature encoder: two strided convolutions (stride 5 then 2, so one frame per 10
    samples); samples vary with the case."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                            conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4, vocab_size=32)
    inputs = {"input_values": {0: "batch", 1: "samples"}}
    outputs = {"last_hidden_state": {0: "batch", 1: "frames"}}

    def make(batch: int, samples: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, samples), dtype=np.float32)
        return {"input_values": torch.from_numpy(x)}
    return Family(_wrap(Wav2Vec2Model(config), inputs, outputs), inputs, outputs, make,
                  {"input_values": {0: MAX_BATCH, 1: 1600}}, export_shape=(2, 400),
                  cases=((1, 160), (2, 400), (3, 960)))


LLAMA_DECODE_LAYERS = 2


def llama_decode() -> Family:
    """One KV-cache decode step of the llama model: one new token per row, the past keys and
    values of every layer as explicit inputs, the grown keys and values as outputs. The
    past comes from a prefill of the same model on random tokens."""
    from transformers import DynamicCache, LlamaForCausalLM
    config = _llama_config()
    assert config.num_hidden_layers == LLAMA_DECODE_LAYERS
    model = LlamaForCausalLM(config).eval()

    class DecodeStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, past_key_0, past_value_0,
                    past_key_1, past_value_1):
            cache = DynamicCache([(past_key_0, past_value_0), (past_key_1, past_value_1)])
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, cache=cache,
                             use_cache=True)
            present = [t for layer in out.cache.layers for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    kv = {0: "batch", 2: "past"}
    present = {0: "batch", 2: "total"}
    inputs = {"input_ids": BATCH, "attention_mask": {0: "batch", 1: "total"}}
    outputs = {"logits": BATCH}
    for i in range(LLAMA_DECODE_LAYERS):
        inputs |= {f"past_key_{i}": kv, f"past_value_{i}": kv}
        outputs |= {f"present_key_{i}": present, f"present_value_{i}": present}

    def make(batch: int, past: int, rng: np.random.Generator) -> dict:
        prefix = torch.from_numpy(rng.integers(0, config.vocab_size, (batch, past), dtype=np.int64))
        with torch.no_grad():
            cache = model(input_ids=prefix, use_cache=True).cache
        mask = np.ones((batch, past + 1), dtype=np.int64)
        if batch > 1:
            mask[-1, :2] = 0      # as if the last row were left-padded by two tokens
        feeds = {"input_ids": torch.from_numpy(rng.integers(0, config.vocab_size, (batch, 1), dtype=np.int64)),
                 "attention_mask": torch.from_numpy(mask)}
        for i, layer in enumerate(cache.layers):
            feeds[f"past_key_{i}"] = layer.keys
            feeds[f"past_value_{i}"] = layer.values
        return feeds

    bounds = {"input_ids": {0: MAX_BATCH}, "attention_mask": {0: MAX_BATCH, 1: MAX_SEQ + 1}}
    bounds |= {name: {0: MAX_BATCH, 2: MAX_SEQ} for name in inputs if name.startswith("past")}
    return Family(DecodeStep().eval(), inputs, outputs, make, bounds, export_shape=(2, 7),
                  derived={"attention_mask": {1: ("past", 1)}})


FAMILIES: dict[str, Callable[[], Family]] = {
    f.__name__: f for f in (gpt2, llama, bert, vit, whisper_encoder, t5_encoder, wav2vec2,
                            llama_decode)}


# --------------------------------------------------------------------------- export

def _rng(family: str, case: int) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(family.encode()), case])


def _dynamic_shapes(fam: Family) -> tuple:
    """torch.export dynamic_shapes from the family's axes and bounds: one spec per input, in
    order, packed in a 1-tuple when the model takes them as `*args`."""
    from torch.export import Dim
    dims: dict[str, object] = {}

    def dim(name: str, bound: int):
        if name not in dims:
            dims[name] = Dim(name, max=bound)
        return dims[name]

    # plain axes first, so derived axes can refer to them
    for name, axes in fam.inputs.items():
        for axis, dname in axes.items():
            if axis not in fam.derived.get(name, {}):
                dim(dname, fam.bounds[name][axis])
    shapes = []
    for name, axes in fam.inputs.items():
        spec = {}
        for axis, dname in axes.items():
            if axis in fam.derived.get(name, {}):
                base, offset = fam.derived[name][axis]
                spec[axis] = dims[base] + offset
            else:
                spec[axis] = dims[dname]
        shapes.append(spec or None)
    if isinstance(fam.model, HFOutputs):
        return (tuple(shapes),)
    return tuple(shapes)


def export(fam: Family, exporter: str, path: str) -> None:
    """Export fam.model to one self-contained ONNX file at path."""
    import onnx
    example = fam.make_inputs(*fam.export_shape, _rng("export", 0))
    args = tuple(example[name] for name in fam.inputs)
    names = dict(input_names=list(fam.inputs), output_names=list(fam.outputs))
    with torch.no_grad():
        if exporter == "classic":
            torch.onnx.export(fam.model, args, path, dynamo=False, opset_version=CLASSIC_OPSET,
                              dynamic_axes={**fam.inputs, **fam.outputs}, **names)
        else:
            program = torch.onnx.export(fam.model, args, dynamo=True, optimize=True,
                                        dynamic_shapes=_dynamic_shapes(fam), **names)
            program.save(path, external_data=False)
    model = onnx.load(path)     # fails if it refers to external data files
    _strip_node_metadata(model.graph)
    onnx.save_model(model, path, save_as_external_data=False)
    onnx.checker.check_model(path, full_check=False)


def _strip_node_metadata(graph) -> None:
    """Drop the dynamo exporter's per-node metadata (stack traces with this machine's paths,
    FX node text): it has no meaning for the graph and is most of the file's size."""
    for node in graph.node:
        del node.metadata_props[:]
        for attr in node.attribute:
            if attr.HasField("g"):
                _strip_node_metadata(attr.g)
            for g in attr.graphs:
                _strip_node_metadata(g)


def graph_inputs(path: str) -> dict:
    """{name: {"dtype", "dynamic_axes": {axis: dim_param}, "shape"}} of the ONNX graph inputs."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    out = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        t = value.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else
                (d.dim_value if d.HasField("dim_value") else None) for d in t.shape.dim]
        out[value.name] = {
            "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name,
            "dynamic_axes": {str(a): d for a, d in enumerate(dims) if isinstance(d, str)},
            "shape": dims,
        }
    return out


def _opset(path: str) -> int:
    import onnx
    model = onnx.load(path, load_external_data=False)
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def reference(fam: Family, family: str, path: str) -> tuple[dict, float]:
    """Run the ONNX file in onnxruntime at the family's cases; return the .npz arrays and the
    largest |onnxruntime - torch eager| over every case and output."""
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    onnx_inputs = [i.name for i in session.get_inputs()]
    arrays: dict[str, np.ndarray] = {}
    worst = 0.0
    for k, (batch, length) in enumerate(fam.cases):
        feeds = fam.make_inputs(batch, length, _rng(family, k))
        assert list(feeds) == onnx_inputs, (list(feeds), onnx_inputs)
        np_feeds = {name: t.numpy() for name, t in feeds.items()}
        got = session.run(None, np_feeds)
        with torch.no_grad():
            want = fam.model(*feeds.values())
        assert len(got) == len(want) == len(fam.outputs)
        for i, (g, w) in enumerate(zip(got, want)):
            w = w.numpy()
            if g.shape != w.shape:
                raise AssertionError(f"case {k} output {i}: onnxruntime {g.shape}, torch {w.shape}")
            worst = max(worst, float(np.max(np.abs(g - w))) if g.size else 0.0)
            arrays[f"case{k}_out_{i}"] = g
        for name, a in np_feeds.items():
            arrays[f"case{k}_in_{name}"] = a
    return arrays, worst


def work(family: str, exporter: str, out_dir: str) -> dict:
    """Export one family with one exporter, write its .onnx and .npz; the manifest entry."""
    entry: dict = {"family": family, "exporter": exporter}
    stem = os.path.join(out_dir, f"{family}_{exporter}")
    try:
        torch.manual_seed(0)
        fam = FAMILIES[family]()
        fam.model.eval()
        export(fam, exporter, stem + ".onnx")
        inputs = graph_inputs(stem + ".onnx")
        missing = [f"{n}[{a}]" for n, axes in fam.inputs.items() for a in axes
                   if str(a) not in inputs.get(n, {}).get("dynamic_axes", {})]
        if missing:
            raise AssertionError(f"exported with fixed size on dynamic axes {missing}")
        arrays, worst = reference(fam, family, stem + ".onnx")
        if not worst < TOLERANCE:
            raise AssertionError(f"onnxruntime differs from torch eager by {worst:.3g}")
    except Exception as exc:   # noqa: BLE001 - recorded in the manifest
        traceback.print_exc()
        for ext in (".onnx", ".onnx.data", ".npz"):
            if os.path.exists(stem + ext):
                os.remove(stem + ext)
        entry["error"] = f"{type(exc).__name__}: {exc}".strip()
        return entry
    np.savez_compressed(stem + ".npz", **arrays)
    entry.update({
        "file": os.path.basename(stem + ".onnx"),
        "inputs": {n: {"dtype": v["dtype"], "dynamic_axes": v["dynamic_axes"]}
                   for n, v in inputs.items()},
        "shapes": {n: v["shape"] for n, v in inputs.items()},
        "bounds": {n: {str(a): b for a, b in axes.items()} for n, axes in fam.bounds.items()},
        "opset": _opset(stem + ".onnx"),
        "cases": len(fam.cases),
        "max_err_vs_torch": worst,
    })
    return entry


# --------------------------------------------------------------------------- driver

def run_worker(family: str, exporter: str, out_dir: str) -> dict:
    """work() in a fresh interpreter, so a crash, hang or leaked state stays contained."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = f.name
    cmd = [sys.executable, os.path.abspath(__file__), "--out", out_dir,
           "--_worker", family, exporter, result_path]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
        if os.path.getsize(result_path):
            with open(result_path) as f:
                entry = json.load(f)
        else:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            entry = {"family": family, "exporter": exporter,
                     "error": f"worker exited with {proc.returncode}: {tail[0]}"}
        if "error" in entry:
            sys.stderr.write(proc.stderr[-4000:])
    except subprocess.TimeoutExpired:
        entry = {"family": family, "exporter": exporter,
                 "error": f"timed out after {WORKER_TIMEOUT_S} s"}
    finally:
        os.remove(result_path)
    return entry


def summary(entry: dict) -> str:
    head = f"{entry['family']:16s} {entry['exporter']:8s}"
    if "error" in entry:
        return f"{head} ERROR {entry['error'].splitlines()[0][:160]}"
    dims = ", ".join(f"{n}{v}" for n, v in entry["shapes"].items())
    return f"{head} ok  max_err={entry['max_err_vs_torch']:.2e}  {dims}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (%(default)s)")
    parser.add_argument("--only", help="comma-separated families (default: all): "
                        + ",".join(FAMILIES))
    parser.add_argument("--_worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    if args._worker:
        family, exporter, result_path = args._worker
        entry = work(family, exporter, args.out)
        with open(result_path, "w") as f:
            json.dump(entry, f)
        return 0

    families = args.only.split(",") if args.only else list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {list(FAMILIES)}")

    manifest_path = os.path.join(args.out, "manifest.json")
    entries = []
    if args.only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            entries = [e for e in json.load(f) if e["family"] not in families]
    for family in families:
        for exporter in EXPORTERS:
            entry = run_worker(family, exporter, args.out)
            print(summary(entry), flush=True)
            entries.append(entry)
    order = {f: i for i, f in enumerate(FAMILIES)}
    entries.sort(key=lambda e: (order.get(e["family"], len(order)), EXPORTERS.index(e["exporter"])))
    with open(manifest_path, "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
