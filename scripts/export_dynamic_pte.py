"""Export tiny Hugging Face models to ExecuTorch .pte with dynamic shapes: the fixtures in
tests/data/dynamic_pte/.

Why: the runtime's ExecuTorch importer has to handle programs exported with
`torch.export.Dim`s the way real transformer models use them: tensors whose sizes vary at
run time (their upper bounds planned in the .pte), sizes read with `sym_size` and combined
by the SymInt ops of `executorch_prim` (mul / add / floordiv / sym_max ...) before they reach
views, expands, aranges and masks, a KV cache whose length grows. These fixtures are the
models of scripts/export_dynamic_onnx.py (same tiny configs) exported to .pte, so the tests
can run them at several shapes and compare with torch eager, without torch, transformers,
executorch or hub access.

What it makes, for each family (gpt2, llama, bert, vit, whisper_encoder, t5_encoder,
wav2vec2, llama_decode):

    {family}.pte   one program, method "forward", portable kernels only (no partitioner)
    {family}.npz   inputs and torch eager outputs at three shapes, none the export's example
                   shape: `case{k}_in_{i}` (inputs in positional order) and `case{k}_out_{j}`
                   (outputs in order), k = 0..2
    manifest.json  a list, one entry per family: "file", "family", "inputs" [{"name",
                   "dtype", "shape" (a symbolic name such as "batch" for a dynamic axis, else
                   the size)}], "bounds" [per input {axis: max}] (the torch.export Dim
                   maxima, also the .pte's planned upper bounds), "dims" {name: {"min",
                   "max"} (and "multiple_of"), or {"equals": "past + 1"}}, "cases" (3),
                   "attn_implementation", "operators" (the distinct operators of the
                   execution plan, sorted) and "max_err_executorch_vs_torch" (largest
                   |executorch runtime - torch eager| over every case and output); or, where
                   the export or the check failed, "family" and "error" (the exception's
                   first line) instead of the files

Every model is wrapped in a module taking its inputs positionally and returning a tuple of
tensors; exported with `torch.export.export(..., dynamic_shapes=...)`, lowered with
`executorch.exir.to_edge(...).to_executorch()`, the edge verifier off (it specializes the
batch, see export()), otherwise default configs. Attention is "sdpa", the transformers
default; a family whose sdpa export fails is retried with "eager" (the manifest says which
was used, and "note" why: GPT-2's sdpa fails in to_edge's decomposition).

The models are built from tiny configs with random weights (`torch.manual_seed(0)`); inputs
come from a NumPy generator seeded per family and case, so a rerun writes the same data.
Each family is exported in its own subprocess, so one failure or crash does not stop the
others.

Needs torch, transformers and executorch (the runtime and its tests import none of them;
use a side venv, as for scripts/export_executorch.py):

    python scripts/export_dynamic_pte.py [--out tests/data/dynamic_pte] [--only gpt2,bert]

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
                           "tests", "data", "dynamic_pte")
TOLERANCE = 1e-4          # largest accepted |executorch - torch eager|
WORKER_TIMEOUT_S = 600    # per family
ATTENTION = ("sdpa", "eager")   # tried in this order

# Upper bounds of the dynamic axes (the torch.export Dim maxima).
MAX_BATCH = 4
MAX_SEQ = 32
MAX_SAMPLES = 1600
MAX_POSITIONS = 64        # position tables of the text models; MAX_SEQ (+ past) stays below


@dataclass
class Family:
    """One model to export and how to feed it.

    `model` takes the inputs positionally in `inputs` order and returns a tuple of tensors.
    `make_inputs(batch, length, rng)` gives the torch inputs for one case, {name: tensor} in
    `inputs` order; `length` is the family's varying length (tokens, samples, past length)
    and is ignored where only the batch varies. Axes are {axis: name}; `bounds` are
    {input: {axis: max}}, `mins` {dim name: min} (1 where not given).
    """

    model: object
    inputs: dict[str, dict[int, str]]
    make_inputs: Callable
    bounds: dict[str, dict[int, int]]
    export_shape: tuple[int, int] = (2, 8)
    cases: tuple[tuple[int, int], ...] = ((1, 5), (2, 9), (3, 16))
    mins: dict[str, int] = field(default_factory=dict)
    derived: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    """Axes that are another axis plus a constant, {input: {axis: (name, offset)}}: written
    as `Dim + offset` for torch.export."""
    multiples: dict[str, int] = field(default_factory=dict)
    """Dims that are a constant times a free one, {dim name: factor}: written as
    `factor * Dim("_name")` for torch.export, where a plain Dim cannot satisfy its guards."""
    deferred_asserts: bool = False
    """Export with prefer_deferred_runtime_asserts_over_guards: guards that torch cannot prove
    over the Dims' whole ranges become assertions in the graph instead of errors."""


# Cases of the families where only the batch varies (the length is unused).
BATCH_CASES = ((1, 0), (3, 0), (4, 0))


# --------------------------------------------------------------------------- helpers

def _seq_inputs(vocab: int, *, mask: bool = False):
    """make_inputs for token models: random ids, and a right-padded attention mask where the
    last row of a batch > 1 has its last few tokens masked (no row is fully masked)."""

    def make(batch: int, seq: int, rng: np.random.Generator) -> dict:
        out = {"input_ids": torch.from_numpy(rng.integers(0, vocab, (batch, seq), dtype=np.int64))}
        if mask:
            m = np.ones((batch, seq), dtype=np.int64)
            if batch > 1:
                m[-1, seq - max(1, seq // 3):] = 0
            out["attention_mask"] = torch.from_numpy(m)
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


def _wrap(model, inputs, outputs, **fixed) -> HFOutputs:
    return HFOutputs(model, inputs, outputs, **fixed).eval()


BATCH = {0: "batch"}
BATCH_SEQ = {0: "batch", 1: "seq"}


def _text_bounds(names) -> dict:
    return {name: {0: MAX_BATCH, 1: MAX_SEQ} for name in names}


# --------------------------------------------------------------------------- families
# Each takes the attention implementation ("sdpa" or "eager").

def gpt2(attn: str) -> Family:
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=256, n_positions=MAX_POSITIONS, n_embd=32, n_layer=2,
                        n_head=2, use_cache=False, attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ}
    return Family(_wrap(GPT2LMHeadModel(config), inputs, ["logits"], use_cache=False),
                  inputs, _seq_inputs(256), _text_bounds(inputs))


def _llama_config(attn: str):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=MAX_POSITIONS, rope_theta=10000.0,
                       tie_word_embeddings=False, use_cache=False, attn_implementation=attn)


def llama(attn: str) -> Family:
    from transformers import LlamaForCausalLM
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    return Family(_wrap(LlamaForCausalLM(_llama_config(attn)), inputs, ["logits"],
                        use_cache=False),
                  inputs, _seq_inputs(256, mask=True), _text_bounds(inputs))


def bert(attn: str) -> Family:
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                        attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    return Family(_wrap(BertModel(config), inputs, ["last_hidden_state"]), inputs,
                  _seq_inputs(256, mask=True), _text_bounds(inputs))


def vit(attn: str) -> Family:
    from transformers import ViTConfig, ViTModel
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       attn_implementation=attn)
    inputs = {"pixel_values": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
        return {"pixel_values": torch.from_numpy(x)}
    return Family(_wrap(ViTModel(config), inputs, ["last_hidden_state", "pooler_output"]),
                  inputs, make, {"pixel_values": {0: MAX_BATCH}}, cases=BATCH_CASES)


def whisper_encoder(attn: str) -> Family:
    """The encoder refuses any frame count but 2 * max_source_positions, so only the batch
    is dynamic."""
    from transformers import WhisperConfig, WhisperModel
    config = WhisperConfig(vocab_size=256, num_mel_bins=16, d_model=32, encoder_layers=2,
                           encoder_attention_heads=2, encoder_ffn_dim=64, decoder_layers=1,
                           decoder_attention_heads=2, decoder_ffn_dim=64,
                           max_source_positions=16, max_target_positions=16,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           decoder_start_token_id=1, attn_implementation=attn)
    encoder = WhisperModel(config).get_encoder()
    frames = 2 * config.max_source_positions
    inputs = {"input_features": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, config.num_mel_bins, frames), dtype=np.float32)
        return {"input_features": torch.from_numpy(x)}
    return Family(_wrap(encoder, inputs, ["last_hidden_state"]), inputs, make,
                  {"input_features": {0: MAX_BATCH}}, cases=BATCH_CASES)


def t5_encoder(attn: str) -> Family:
    from transformers import T5Config, T5EncoderModel
    config = T5Config(vocab_size=256, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                      num_heads=2, relative_attention_num_buckets=16,
                      relative_attention_max_distance=32, attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    return Family(_wrap(T5EncoderModel(config), inputs, ["last_hidden_state"]), inputs,
                  _seq_inputs(256, mask=True), _text_bounds(inputs))


def wav2vec2(attn: str) -> Family:
    """Feature encoder: two strided convolutions (stride 5 then 2, so one frame per 10
    samples); samples vary with the case. A plain Dim for the samples fails torch.export's
    guards on the frame count ((samples // 10 - 1)**2 > 1 ...); as a multiple of 10
    (`samples = 10 * _samples`, torch's own suggestion) it exports."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                            conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4, vocab_size=32,
                            attn_implementation=attn)
    inputs = {"input_values": {0: "batch", 1: "samples"}}

    def make(batch: int, samples: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, samples), dtype=np.float32)
        return {"input_values": torch.from_numpy(x)}
    return Family(_wrap(Wav2Vec2Model(config), inputs, ["last_hidden_state"]), inputs, make,
                  {"input_values": {0: MAX_BATCH, 1: MAX_SAMPLES}}, export_shape=(2, 640),
                  cases=((1, 160), (2, 400), (3, 960)), mins={"samples": 160},
                  multiples={"samples": 10})


LLAMA_DECODE_LAYERS = 2


def llama_decode(attn: str) -> Family:
    """One KV-cache decode step of the llama model: one new token per row, the past keys and
    values of every layer as explicit inputs, the grown keys and values as outputs. The
    past comes from a prefill of the same model on random tokens. torch.export cannot prove
    the guard min(16 * (past + 1), 32 * (past + 1)) == 16 * (past + 1) over the past's range,
    so that guard is deferred to a run-time assertion in the graph."""
    from transformers import DynamicCache, LlamaForCausalLM
    config = _llama_config(attn)
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
    inputs = {"input_ids": BATCH, "attention_mask": {0: "batch", 1: "total"}}
    for i in range(LLAMA_DECODE_LAYERS):
        inputs |= {f"past_key_{i}": kv, f"past_value_{i}": kv}

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
    return Family(DecodeStep().eval(), inputs, make, bounds, export_shape=(2, 7),
                  derived={"attention_mask": {1: ("past", 1)}}, deferred_asserts=True)


FAMILIES: dict[str, Callable[[str], Family]] = {
    f.__name__: f for f in (gpt2, llama, bert, vit, whisper_encoder, t5_encoder, wav2vec2,
                            llama_decode)}


# --------------------------------------------------------------------------- export

def _rng(family: str, case: int) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(family.encode()), case])


def _dynamic_shapes(fam: Family) -> tuple:
    """torch.export dynamic_shapes from the family's axes, mins and bounds: one spec per
    input, in order, packed in a 1-tuple when the model takes them as `*args`."""
    from torch.export import Dim
    dims: dict[str, object] = {}
    for name, axes in fam.inputs.items():       # plain axes first, derived ones refer to them
        for axis, dname in axes.items():
            if axis in fam.derived.get(name, {}) or dname in dims:
                continue
            low, high = fam.mins.get(dname, 1), fam.bounds[name][axis]
            if dname in fam.multiples:
                f = fam.multiples[dname]
                dims[dname] = f * Dim(f"_{dname}", min=-(-low // f), max=high // f)
            else:
                dims[dname] = Dim(dname, min=low, max=high)
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


def _dims(fam: Family) -> dict:
    """{dim name: {"min", "max"} and "multiple_of" where set, or {"equals": "name + offset"}
    for a derived axis}: the ranges the program was exported for."""
    out: dict[str, dict] = {}
    for name, axes in fam.inputs.items():
        for axis, dname in axes.items():
            if dname in out:
                continue
            if axis in fam.derived.get(name, {}):
                base, offset = fam.derived[name][axis]
                out[dname] = {"equals": f"{base} + {offset}"}
            else:
                out[dname] = {"min": fam.mins.get(dname, 1), "max": fam.bounds[name][axis]}
                if dname in fam.multiples:
                    out[dname]["multiple_of"] = fam.multiples[dname]
    return out


def export(fam: Family, path: str) -> list[list]:
    """Export fam.model to a .pte at path; return the input shapes as the final program
    sees them (a symbol's name for a dynamic axis, else the size)."""
    from executorch.exir import EdgeCompileConfig, to_edge
    example = fam.make_inputs(*fam.export_shape, _rng("export", 0))
    assert list(example) == list(fam.inputs), (list(example), list(fam.inputs))
    args = tuple(example.values())
    with torch.no_grad():
        program = torch.export.export(
            fam.model, args, dynamic_shapes=_dynamic_shapes(fam),
            prefer_deferred_runtime_asserts_over_guards=fam.deferred_asserts)
    # The edge verifier's dtype check (EdgeOpArgValidator) takes len() of the first tensor
    # an op returning Tensor[] (split_with_sizes_copy ...) gives, which guards its dim 0,
    # the batch, to the example's size and silently specializes it; so it is turned off.
    et = to_edge(program, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()
    with open(path, "wb") as f:
        f.write(et.buffer)
    final = et.exported_program()
    return [[str(d) if isinstance(d, torch.SymInt) else int(d) for d in node.meta["val"].shape]
            for node in final.graph.nodes
            if node.op == "placeholder" and node.name in final.graph_signature.user_inputs]


def operators(path: str) -> list[str]:
    """The distinct operators ("name.overload") of every execution plan in the .pte."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    with open(path, "rb") as f:
        program = deserialize_pte_binary(f.read()).program
    if any(plan.delegates for plan in program.execution_plan):
        raise AssertionError("the program has delegates")
    return sorted({f"{op.name}.{op.overload}" if op.overload else op.name
                   for plan in program.execution_plan for op in plan.operators})


def reference(fam: Family, family: str, path: str) -> tuple[dict, float | None]:
    """torch eager's outputs at the family's cases as .npz arrays, and the largest
    |executorch runtime - torch eager| over every case and output (None where the
    executorch runtime cannot be imported)."""
    try:
        from executorch.runtime import Runtime
        method = Runtime.get().load_program(path).load_method("forward")
    except ImportError:
        method = None
    arrays: dict[str, np.ndarray] = {}
    worst = 0.0
    for k, (batch, length) in enumerate(fam.cases):
        feeds = list(fam.make_inputs(batch, length, _rng(family, k)).values())
        with torch.no_grad():
            want = [w.detach().contiguous() for w in fam.model(*feeds)]
        for i, t in enumerate(feeds):
            arrays[f"case{k}_in_{i}"] = t.contiguous().numpy()
        for j, w in enumerate(want):
            arrays[f"case{k}_out_{j}"] = w.numpy()
        if method is None:
            continue
        got = method.execute(feeds)
        if len(got) != len(want):
            raise AssertionError(f"case {k}: executorch gave {len(got)} outputs, torch {len(want)}")
        for j, (g, w) in enumerate(zip(got, want)):
            if tuple(g.shape) != tuple(w.shape):
                raise AssertionError(f"case {k} output {j}: executorch {tuple(g.shape)}, "
                                     f"torch {tuple(w.shape)}")
            if w.numel():
                worst = max(worst, float((g.float() - w.float()).abs().max()))
    return arrays, (worst if method is not None else None)


def work(family: str, out_dir: str) -> dict:
    """Export one family, write its .pte and .npz; the manifest entry. Each attention
    implementation of ATTENTION is tried in turn until one exports and matches."""
    stem = os.path.join(out_dir, family)
    errors = []
    for attn in ATTENTION:
        try:
            torch.manual_seed(0)
            fam = FAMILIES[family](attn)
            fam.model.eval()
            shapes = export(fam, stem + ".pte")
            fixed = [f"{n}[{a}]" for (n, axes), shape in zip(fam.inputs.items(), shapes)
                     for a in axes if isinstance(shape[a], int)]
            if fixed:
                raise AssertionError(f"exported with fixed size on dynamic axes {fixed}")
            ops = operators(stem + ".pte")
            arrays, worst = reference(fam, family, stem + ".pte")
            if worst is not None and not worst < TOLERANCE:
                raise AssertionError(f"executorch differs from torch eager by {worst:.3g}")
            break
        except Exception as exc:   # noqa: BLE001 - recorded in the manifest
            traceback.print_exc()
            for ext in (".pte", ".npz"):
                if os.path.exists(stem + ext):
                    os.remove(stem + ext)
            first = (f"{type(exc).__name__}: {exc}".strip().splitlines() or [""])[0]
            errors.append(f"{attn}: {first}" if len(ATTENTION) > 1 else first)
    else:
        return {"family": family, "error": errors[0] if len(errors) == 1 else " | ".join(errors)}
    np.savez_compressed(stem + ".npz", **arrays)
    entry = {
        "file": os.path.basename(stem + ".pte"),
        "family": family,
        "inputs": [{"name": name, "dtype": str(arrays[f"case0_in_{i}"].dtype),
                    "shape": [axes[a] if a in axes else size for a, size in enumerate(shape)]}
                   for i, ((name, axes), shape) in enumerate(zip(fam.inputs.items(), shapes))],
        "bounds": [{str(a): b for a, b in fam.bounds[name].items()} for name in fam.inputs],
        "dims": _dims(fam),
        "cases": len(fam.cases),
        "attn_implementation": attn,
        "operators": ops,
    }
    if worst is not None:
        entry["max_err_executorch_vs_torch"] = worst
    if errors:
        entry["note"] = "failed first with " + errors[0]
    return entry


# --------------------------------------------------------------------------- driver

def run_worker(family: str, out_dir: str) -> dict:
    """work() in a fresh interpreter, so a crash, hang or leaked state stays contained."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = f.name
    cmd = [sys.executable, os.path.abspath(__file__), "--out", out_dir,
           "--_worker", family, result_path]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
        if os.path.getsize(result_path):
            with open(result_path) as f:
                entry = json.load(f)
        else:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            entry = {"family": family, "error": f"worker exited with {proc.returncode}: {tail[0]}"}
        if "error" in entry or "note" in entry:
            sys.stderr.write(proc.stderr[-4000:])
    except subprocess.TimeoutExpired:
        entry = {"family": family, "error": f"timed out after {WORKER_TIMEOUT_S} s"}
    finally:
        os.remove(result_path)
    return entry


def summary(entry: dict) -> str:
    head = f"{entry['family']:16s}"
    if "error" in entry:
        return f"{head} ERROR {entry['error'][:200]}"
    err = entry.get("max_err_executorch_vs_torch")
    dims = ", ".join(f"{i['name']}{i['shape']}" for i in entry["inputs"])
    return (f"{head} ok  {entry['attn_implementation']}  max_err="
            f"{'n/a' if err is None else f'{err:.2e}'}  {dims}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (%(default)s)")
    parser.add_argument("--only", help="comma-separated families (default: all): "
                        + ",".join(FAMILIES))
    parser.add_argument("--_worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    if args._worker:
        family, result_path = args._worker
        entry = work(family, args.out)
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
        entry = run_worker(family, args.out)
        print(summary(entry), flush=True)
        entries.append(entry)
    order = {f: i for i, f in enumerate(FAMILIES)}
    entries.sort(key=lambda e: order.get(e["family"], len(order)))
    with open(manifest_path, "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
