"""The tiny seeded transformers models that both dynamic-shape fixture scripts export:
scripts/export_dynamic_onnx.py (tests/data/dynamic/) and scripts/export_dynamic_pte.py
(tests/data/dynamic_pte/), with the bits of their export and driver code that match.

Shared so that the two fixture sets hold the same models: one tiny config per family, random
weights from `torch.manual_seed(0)` (set by the caller before building one), inputs from a
NumPy generator seeded per family and case, the same bounds of the dynamic axes. A family
takes the attention implementation (None: the config's default) and `pte`, where the .pte
fixtures differ (fewer inputs or outputs, other cases, tighter Dims; each family says which).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

# Upper bounds of the dynamic axes (the torch.export Dim maxima).
MAX_BATCH = 4
MAX_SEQ = 32
MAX_SAMPLES = 1600
MAX_POSITIONS = 64        # position tables of the text models; MAX_SEQ (+ past) stays below

CASES = ((1, 5), (2, 9), (3, 16))     # (batch, length) of the reference inputs
# Cases of the .pte families where only the batch varies (the length is unused): none is
# the export's example shape.
BATCH_CASES = ((1, 0), (3, 0), (4, 0))


@dataclass
class Family:
    """One model to export and how to feed it.

    `model` takes the inputs positionally in `inputs` order and returns a tuple of tensors
    in `outputs` order. `make_inputs(batch, length, rng)` gives the torch inputs for one
    case, {name: tensor} in `inputs` order; `length` is the family's varying length (tokens,
    samples, past length) and is ignored where only the batch varies. Axes are {axis: name};
    `bounds` are {input: {axis: max}}, `mins` {dim name: min} (dynamic_shapes' default_min
    where not given).
    """

    model: object
    inputs: dict[str, dict[int, str]]
    outputs: dict[str, dict[int, str]]
    make_inputs: Callable
    bounds: dict[str, dict[int, int]]
    export_shape: tuple[int, int] = (2, 8)
    cases: tuple[tuple[int, int], ...] = CASES
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
# Each takes the attention implementation ("sdpa", "eager"; None for the config's default,
# sdpa) and whether it is built for the .pte fixtures.

def gpt2(attn: str | None = None, *, pte: bool = False) -> Family:
    """The .pte takes no attention mask."""
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=256, n_positions=MAX_POSITIONS, n_embd=32, n_layer=2,
                        n_head=2, use_cache=False, attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ} if pte else {"input_ids": BATCH_SEQ,
                                                    "attention_mask": BATCH_SEQ}
    outputs = {"logits": BATCH_SEQ}
    return Family(_wrap(GPT2LMHeadModel(config), inputs, outputs, use_cache=False),
                  inputs, outputs, _seq_inputs(256, mask=not pte), _text_bounds(inputs))


def _llama_config(attn: str | None):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=MAX_POSITIONS, rope_theta=10000.0,
                       tie_word_embeddings=False, use_cache=False, attn_implementation=attn)


def llama(attn: str | None = None, *, pte: bool = False) -> Family:
    from transformers import LlamaForCausalLM
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"logits": BATCH_SEQ}
    return Family(_wrap(LlamaForCausalLM(_llama_config(attn)), inputs, outputs,
                        use_cache=False),
                  inputs, outputs, _seq_inputs(256, mask=True), _text_bounds(inputs))


def bert(attn: str | None = None, *, pte: bool = False) -> Family:
    """The .pte takes no token type ids and gives no pooler output."""
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                        attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"last_hidden_state": BATCH_SEQ}
    if not pte:
        inputs |= {"token_type_ids": BATCH_SEQ}
        outputs |= {"pooler_output": BATCH}
    return Family(_wrap(BertModel(config), inputs, outputs), inputs, outputs,
                  _seq_inputs(256, mask=True, token_types=not pte), _text_bounds(inputs))


def vit(attn: str | None = None, *, pte: bool = False) -> Family:
    """The .pte's cases are BATCH_CASES."""
    from transformers import ViTConfig, ViTModel
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       attn_implementation=attn)
    inputs = {"pixel_values": BATCH}
    outputs = {"last_hidden_state": BATCH, "pooler_output": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
        return {"pixel_values": torch.from_numpy(x)}
    return Family(_wrap(ViTModel(config), inputs, outputs), inputs, outputs, make,
                  {"pixel_values": {0: MAX_BATCH}}, cases=BATCH_CASES if pte else CASES)


def whisper_encoder(attn: str | None = None, *, pte: bool = False) -> Family:
    """The encoder refuses any frame count but 2 * max_source_positions, so only the batch
    is dynamic. The .pte's cases are BATCH_CASES."""
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
    outputs = {"last_hidden_state": BATCH}

    def make(batch: int, _length: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, config.num_mel_bins, frames), dtype=np.float32)
        return {"input_features": torch.from_numpy(x)}
    return Family(_wrap(encoder, inputs, outputs), inputs, outputs, make,
                  {"input_features": {0: MAX_BATCH}}, cases=BATCH_CASES if pte else CASES)


def t5_encoder(attn: str | None = None, *, pte: bool = False) -> Family:
    from transformers import T5Config, T5EncoderModel
    config = T5Config(vocab_size=256, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                      num_heads=2, relative_attention_num_buckets=16,
                      relative_attention_max_distance=32, attn_implementation=attn)
    inputs = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    outputs = {"last_hidden_state": BATCH_SEQ}
    return Family(_wrap(T5EncoderModel(config), inputs, outputs), inputs, outputs,
                  _seq_inputs(256, mask=True), _text_bounds(inputs))


def wav2vec2(attn: str | None = None, *, pte: bool = False) -> Family:
    """Feature encoder: two strided convolutions (stride 5 then 2, so one frame per 10
    samples); samples vary with the case. For the .pte a plain Dim for the samples fails
    torch.export's guards on the frame count ((samples // 10 - 1)**2 > 1 ...); as a
    multiple of 10 (`samples = 10 * _samples`, torch's own suggestion, at least 160) and
    exported at 640 samples it exports."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                            conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=4, vocab_size=32,
                            attn_implementation=attn)
    inputs = {"input_values": {0: "batch", 1: "samples"}}
    outputs = {"last_hidden_state": {0: "batch", 1: "frames"}}

    def make(batch: int, samples: int, rng: np.random.Generator) -> dict:
        x = rng.standard_normal((batch, samples), dtype=np.float32)
        return {"input_values": torch.from_numpy(x)}
    export = (dict(export_shape=(2, 640), mins={"samples": 160}, multiples={"samples": 10})
              if pte else dict(export_shape=(2, 400)))
    return Family(_wrap(Wav2Vec2Model(config), inputs, outputs), inputs, outputs, make,
                  {"input_values": {0: MAX_BATCH, 1: MAX_SAMPLES}},
                  cases=((1, 160), (2, 400), (3, 960)), **export)


LLAMA_DECODE_LAYERS = 2


def llama_decode(attn: str | None = None, *, pte: bool = False) -> Family:
    """One KV-cache decode step of the llama model: one new token per row, the past keys and
    values of every layer as explicit inputs, the grown keys and values as outputs. The
    past comes from a prefill of the same model on random tokens. For the .pte, torch.export
    cannot prove the guard min(16 * (past + 1), 32 * (past + 1)) == 16 * (past + 1) over the
    past's range, so that guard is deferred to a run-time assertion in the graph."""
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
                  derived={"attention_mask": {1: ("past", 1)}}, deferred_asserts=pte)


FAMILIES: dict[str, Callable[..., Family]] = {
    f.__name__: f for f in (gpt2, llama, bert, vit, whisper_encoder, t5_encoder, wav2vec2,
                            llama_decode)}


# --------------------------------------------------------------------------- export

def seeded_rng(family: str, case: int) -> np.random.Generator:
    """The generator of one family's inputs at one case (family "export", case 0: the
    export's example inputs)."""
    return np.random.default_rng([zlib.crc32(family.encode()), case])


def dynamic_shapes(fam: Family, default_min: int | None = None) -> tuple:
    """torch.export dynamic_shapes from the family's axes, mins and bounds: one spec per
    input, in order, packed in a 1-tuple when the model takes them as `*args`. A Dim without
    a min in `fam.mins` gets `default_min` (None: torch.export's own)."""
    from torch.export import Dim
    dims: dict[str, object] = {}
    for name, axes in fam.inputs.items():       # plain axes first, derived ones refer to them
        for axis, dname in axes.items():
            if axis in fam.derived.get(name, {}) or dname in dims:
                continue
            low, high = fam.mins.get(dname, default_min), fam.bounds[name][axis]
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


# --------------------------------------------------------------------------- driver

def _run_worker(script: str, out_dir: str, key: dict, timeout_s: int) -> dict:
    """`script --out out_dir --_worker *key.values() RESULT` in a fresh interpreter, so a
    crash, hang or leaked state stays contained; the manifest entry it wrote to RESULT, or
    `key` with an "error". The worker's stderr is passed on where the entry has an "error"
    or a "note"."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = f.name
    cmd = [sys.executable, os.path.abspath(script), "--out", out_dir,
           "--_worker", *key.values(), result_path]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if os.path.getsize(result_path):
            with open(result_path) as f:
                entry = json.load(f)
        else:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            entry = {**key, "error": f"worker exited with {proc.returncode}: {tail[0]}"}
        if "error" in entry or "note" in entry:
            sys.stderr.write(proc.stderr[-4000:])
    except subprocess.TimeoutExpired:
        entry = {**key, "error": f"timed out after {timeout_s} s"}
    finally:
        os.remove(result_path)
    return entry


def command_line(script: str, doc: str, default_out: str, work: Callable[..., dict],
                 summary: Callable[[dict], str], timeout_s: int,
                 variants: tuple[str, tuple[str, ...]] | None = None,
                 argv: list[str] | None = None) -> int:
    """A fixture script's command line: `[--out DIR] [--only FAMILIES]` runs
    `work(family[, variant], out_dir)` for each family (and each variant) in a worker
    subprocess of `script`, prints `summary(entry)` and writes the entries to manifest.json
    in family (and variant) order; with --only, the other families' entries already there
    are kept. `variants` is (entry key, names), e.g. ("exporter", ("classic", "dynamo"))."""
    key_name, names = variants or (None, (None,))
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=default_out, help="output folder (%(default)s)")
    parser.add_argument("--only", help="comma-separated families (default: all): "
                        + ",".join(FAMILIES))
    parser.add_argument("--_worker", nargs=3 if variants else 2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    if args._worker:
        *job, result_path = args._worker
        entry = work(*job, args.out)
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
        for name in names:
            key = {"family": family} if variants is None else {"family": family, key_name: name}
            entry = _run_worker(script, args.out, key, timeout_s)
            print(summary(entry), flush=True)
            entries.append(entry)
    order = {f: i for i, f in enumerate(FAMILIES)}
    entries.sort(key=lambda e: (order.get(e["family"], len(order)),
                                names.index(e[key_name]) if variants else 0))
    with open(manifest_path, "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    return 0
