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

The models (scripts/dynamic_families.py, shared with scripts/export_dynamic_pte.py) are
built from tiny configs with random weights (`torch.manual_seed(0)`); inputs come from a
NumPy generator seeded per family and case, so a rerun writes the same data.
Each family and exporter is exported in its own subprocess, so one failure or crash does not
stop the others.

Needs torch, transformers, onnx, onnxruntime and onnxscript (the runtime and its tests import
none of them; `pip install torch transformers onnx onnxruntime onnxscript` in a separate venv):

    python scripts/export_dynamic_onnx.py [--out tests/data/dynamic] [--only gpt2,bert]

With --only, the other families' entries already in manifest.json are kept.
"""
from __future__ import annotations

import os
import sys
import traceback

import numpy as np
import torch

from dynamic_families import FAMILIES, Family, command_line, dynamic_shapes, seeded_rng

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "data", "dynamic")
EXPORTERS = ("classic", "dynamo")
CLASSIC_OPSET = 17
TOLERANCE = 1e-4          # largest accepted |onnxruntime - torch eager|
WORKER_TIMEOUT_S = 600    # per family and exporter


# --------------------------------------------------------------------------- export

def export(fam: Family, exporter: str, path: str) -> None:
    """Export fam.model to one self-contained ONNX file at path."""
    import onnx
    example = fam.make_inputs(*fam.export_shape, seeded_rng("export", 0))
    args = tuple(example[name] for name in fam.inputs)
    names = dict(input_names=list(fam.inputs), output_names=list(fam.outputs))
    with torch.no_grad():
        if exporter == "classic":
            torch.onnx.export(fam.model, args, path, dynamo=False, opset_version=CLASSIC_OPSET,
                              dynamic_axes={**fam.inputs, **fam.outputs}, **names)
        else:
            program = torch.onnx.export(fam.model, args, dynamo=True, optimize=True,
                                        dynamic_shapes=dynamic_shapes(fam), **names)
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
        feeds = fam.make_inputs(batch, length, seeded_rng(family, k))
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

def summary(entry: dict) -> str:
    head = f"{entry['family']:16s} {entry['exporter']:8s}"
    if "error" in entry:
        return f"{head} ERROR {entry['error'].splitlines()[0][:160]}"
    dims = ", ".join(f"{n}{v}" for n, v in entry["shapes"].items())
    return f"{head} ok  max_err={entry['max_err_vs_torch']:.2e}  {dims}"


def main(argv: list[str] | None = None) -> int:
    return command_line(__file__, __doc__, DEFAULT_OUT, work, summary, WORKER_TIMEOUT_S,
                        ("exporter", EXPORTERS), argv)


if __name__ == "__main__":
    sys.exit(main())
