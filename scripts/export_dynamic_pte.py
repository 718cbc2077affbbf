"""Export tiny Hugging Face models to ExecuTorch .pte with dynamic shapes: the fixtures in
tests/data/dynamic_pte/.

Why: the runtime's ExecuTorch importer has to handle programs exported with
`torch.export.Dim`s the way real transformer models use them: tensors whose sizes vary at
run time (their upper bounds planned in the .pte), sizes read with `sym_size` and combined
by the SymInt ops of `executorch_prim` (mul / add / floordiv / sym_max ...) before they reach
views, expands, aranges and masks, a KV cache whose length grows. These fixtures are the
models of scripts/export_dynamic_onnx.py (scripts/dynamic_families.py, same tiny configs)
exported to .pte, so the tests can run them at several shapes and compare with torch eager,
without torch, transformers, executorch or hub access.

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

import os
import sys
import traceback

import numpy as np
import torch

from dynamic_families import FAMILIES, Family, command_line, dynamic_shapes, seeded_rng

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "data", "dynamic_pte")
TOLERANCE = 1e-4          # largest accepted |executorch - torch eager|
WORKER_TIMEOUT_S = 600    # per family
ATTENTION = ("sdpa", "eager")   # tried in this order


# --------------------------------------------------------------------------- export

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
    example = fam.make_inputs(*fam.export_shape, seeded_rng("export", 0))
    assert list(example) == list(fam.inputs), (list(example), list(fam.inputs))
    args = tuple(example.values())
    with torch.no_grad():
        program = torch.export.export(
            fam.model, args, dynamic_shapes=dynamic_shapes(fam, default_min=1),
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
        feeds = list(fam.make_inputs(batch, length, seeded_rng(family, k)).values())
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
            fam = FAMILIES[family](attn, pte=True)
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

def summary(entry: dict) -> str:
    head = f"{entry['family']:16s}"
    if "error" in entry:
        return f"{head} ERROR {entry['error'][:200]}"
    err = entry.get("max_err_executorch_vs_torch")
    dims = ", ".join(f"{i['name']}{i['shape']}" for i in entry["inputs"])
    return (f"{head} ok  {entry['attn_implementation']}  max_err="
            f"{'n/a' if err is None else f'{err:.2e}'}  {dims}")


def main(argv: list[str] | None = None) -> int:
    return command_line(__file__, __doc__, DEFAULT_OUT, work, summary, WORKER_TIMEOUT_S,
                        argv=argv)


if __name__ == "__main__":
    sys.exit(main())
