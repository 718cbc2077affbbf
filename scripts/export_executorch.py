"""Export the ExecuTorch test programs in tests/data/executorch/ (not run by the tests).

Needs executorch and torch, which the runtime and its tests never import; use a side venv
outside the repository:

    python3 -m venv /tmp/venv-et
    /tmp/venv-et/bin/pip install executorch==1.5.1 torch==2.13.0 onnx onnxscript
    /tmp/venv-et/bin/python scripts/export_executorch.py [OUTPUT_DIR [NAME ...]]

Every program is exported without a partitioner (portable kernels only). For each NAME it
writes NAME.pte and NAME.npz holding the inputs and torch eager's outputs:
`{method}_call{k}_in{i}` and `{method}_call{k}_out{j}` (several calls where the model keeps
state between them). delegated.pte (XNNPACK) has no .npz: the importer refuses it. mobilenet is also exported to ONNX (mobilenet.onnx) for the parity test
between the two importers.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn
from torch.export import export


class MobileNetBlock(nn.Module):
    """A MobileNet-v2/v3 style network: strided stem, depthwise + pointwise convolutions with
    batch norm, ReLU6 and hardswish, global average pool, classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
                                       nn.BatchNorm2d(8), nn.ReLU6())
        self.pointwise = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16),
                                       nn.Hardswish())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pointwise(self.depthwise(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))


class LSTMModel(nn.Module):
    """A one-layer LSTM over a short sequence, then a linear head on every step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size=6, hidden_size=8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y)


class Encoder(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class Decoder(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, z: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(z)) * scale


class Counter(nn.Module):
    """State updated in place: a call counter (uninitialized in the .pte: ExecuTorch leaves
    it to the runtime, which zero-fills it) and a running sum of the inputs whose initial value
    the .pte carries (InitializedMutableBufferPass), both named in the program."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("total", torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1.0)
        self.total.add_(x)
        return self.total / self.count


class ChannelsLast(nn.Module):
    """A convolution whose input is expected in channels-last (NHWC) memory."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Elementwise(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, n: torch.Tensor):
        return (torch.sub(x, y, alpha=2), 3.0 - x, torch.div(x, y, rounding_mode="floor"),
                torch.div(x, y, rounding_mode="trunc"), x ** 2, torch.pow(y.abs(), 1.5),
                torch.minimum(x, y), torch.maximum(x, y), -x, x.abs().sqrt(), torch.rsqrt(y.abs() + 1),
                torch.exp(x), torch.log(y.abs() + 1), torch.sin(x), torch.cos(x),
                torch.erf(x), torch.floor(x), torch.ceil(x), torch.round(x), torch.sign(x),
                nn.functional.silu(x), nn.functional.gelu(x), nn.functional.gelu(x, approximate="tanh"),
                nn.functional.hardsigmoid(x), nn.functional.leaky_relu(x, 0.1), nn.functional.elu(x),
                nn.functional.softplus(x), torch.clamp(x, -0.5, 0.5), torch.clamp(x, min=y),
                x > 0.1, x <= y, x != y, torch.logical_and(x > 0, y > 0), torch.logical_or(x > 0, y > 0),
                torch.where(x > y, x, 0.0), x.masked_fill(y < 0, -1.0), n * 3 + 1, n // 2, n.float() / 3)


class Reductions(nn.Module):
    def forward(self, x: torch.Tensor):
        return (x.sum(dim=1), x.sum(dim=(0, 2), keepdim=True), x.sum(), x.amax(dim=-1), x.amin(dim=0),
                x.argmax(dim=1), x.argmax(), (x > 1).any(), (x > -3).all(dim=2),
                torch.log_softmax(x, dim=-1), torch.softmax(x, dim=0), x.mean(dim=(1, 2)))


class Layers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1d = nn.Conv1d(3, 4, 3, padding=1, stride=2)
        self.deconv = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
        self.group_norm = nn.GroupNorm(2, 4)
        self.embedding = nn.Embedding(10, 4)
        self.linear = nn.Linear(4, 3, bias=False)

    def forward(self, img: torch.Tensor, seq: torch.Tensor, tokens: torch.Tensor):
        pooled = nn.functional.avg_pool2d(img, 2, stride=1, padding=1, count_include_pad=False)
        adaptive = nn.functional.adaptive_avg_pool2d(img, (2, 3))
        maxed = nn.functional.max_pool2d(img, 3, stride=2, padding=1, ceil_mode=True)
        emb = self.embedding(tokens)
        return (pooled, adaptive, maxed, self.conv1d(seq), self.deconv(img),
                self.group_norm(self.conv1d(seq)), emb, self.linear(emb) @ self.linear(emb).transpose(1, 2),
                torch.mm(seq[0], seq[1].t()))


class Movement(nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor):
        parts = torch.split(x, 2, dim=1)
        rows = torch.unbind(x, dim=0)
        return (nn.functional.pad(x, (1, 2, 0, 1), value=0.5), x.repeat(2, 1, 3), torch.tril(x[0]),
                torch.triu(x[1], diagonal=1), torch.stack([rows[0], rows[1]], dim=1), parts[0] + 1,
                parts[-1] * 2, x[:, idx], torch.index_select(x, 2, idx), torch.gather(x, 2, idx.expand(2, 5, 2)),
                x[:, 1:5:2, ::2], x[1], torch.arange(6, dtype=torch.float32) + x[0, 0, 0],
                torch.arange(2, 11, 3) * idx.sum(), torch.zeros(2, 3) + x[0, :2, :3], torch.ones(3, dtype=torch.int64) + idx[0],
                torch.cat([x, x * 2], dim=-1), x.permute(2, 0, 1).contiguous().view(4, -1),
                x.unsqueeze(1).expand(2, 3, 5, 4).clone())


class AttentionBlock(nn.Module):
    """LayerNorm, fused QKV projection, causal scaled_dot_product_attention, GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.norm = nn.Linear(16, 48), nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
        q, k, v = (t.view(1, 8, 2, 8).transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return nn.functional.gelu(y.transpose(1, 2).reshape(1, 8, 16))


class Resample(nn.Module):
    def forward(self, x: torch.Tensor):
        f = nn.functional.interpolate
        return (f(x, scale_factor=2, mode="nearest"), f(x, size=(5, 7), mode="nearest"),
                f(x, scale_factor=2, mode="bilinear", align_corners=False),
                f(x, size=(5, 7), mode="bilinear", align_corners=True))


class Statistics(nn.Module):
    def forward(self, h: torch.Tensor):
        values, indices = h.max(dim=1)
        return (values, indices, h.min(dim=-1, keepdim=True).values, torch.cumsum(h, 1),
                h.var(1), h.var(dim=(0, 2), correction=0, keepdim=True),
                torch.topk(h, 2, dim=-1).values, torch.topk(h, 3, dim=1, largest=False).indices)


def export_more(out_dir: str) -> None:
    """A GRU, an attention block with SDPA, resampling and statistics: one method each."""
    torch.manual_seed(0)
    cases = {"gru": (nn.GRU(4, 6, batch_first=True).eval(), (torch.randn(2, 3, 4),)),
             "attention": (AttentionBlock().eval(), (torch.randn(1, 8, 16),)),
             "resample": (Resample(), (torch.randn(1, 2, 3, 3),)),
             "statistics": (Statistics(), (torch.randn(2, 5, 4),))}
    programs = {name: export(model, args) for name, (model, args) in cases.items()}
    program = to_edge(programs).to_executorch()
    arrays = {}
    with torch.no_grad():
        for name, (model, args) in cases.items():
            for i, t in enumerate(args):
                arrays[f"{name}_call0_in{i}"] = t
            outs = model(*args)
            outs = outs if isinstance(outs, tuple) else (outs,)
            for j, t in enumerate(outs):
                arrays[f"{name}_call0_out{j}"] = t
    _save(out_dir, "more", program.buffer, arrays)


class CachePut(nn.Module):
    """A key cache written at a run-time position (index_put_) and read whole."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 6, 4))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.k_cache[:, pos] = x
        return torch.softmax(self.k_cache.sum(-1), -1)


class CacheCopy(nn.Module):
    """A cache updated with index_copy_ and summed along time."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(6, 4))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.cache.index_copy_(0, pos, x)
        return self.cache.cumsum(0)


def export_kv_cache(out_dir: str) -> None:
    """Two methods, each with a cache (mutable buffer) written at a position given as input;
    three calls at positions 0, 2 and 4."""
    torch.manual_seed(0)
    cases = {"put": (CachePut, (1, 1, 4)), "copy": (CacheCopy, (1, 4))}
    programs = {name: export(cls().eval(), (torch.randn(*shape), torch.tensor([0])))
                for name, (cls, shape) in cases.items()}
    config = ExecutorchBackendConfig(emit_mutable_buffer_names=True)
    program = to_edge(programs).to_executorch(config)
    arrays = {}
    with torch.no_grad():
        for name, (cls, shape) in cases.items():
            reference = cls().eval()
            for k in range(3):
                x, pos = torch.randn(*shape), torch.tensor([2 * k])
                arrays[f"{name}_call{k}_in0"], arrays[f"{name}_call{k}_in1"] = x, pos
                arrays[f"{name}_call{k}_out0"] = reference(x, pos).clone()
    _save(out_dir, "kv_cache", program.buffer, arrays)


def export_ops(out_dir: str) -> None:
    """One program whose methods exercise most operators the importer lowers."""
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    n = torch.tensor([5, -7, 9, 2])
    img, seq, tokens = torch.randn(1, 3, 5, 6), torch.randn(2, 3, 8), torch.tensor([[1, 3, 9], [0, 0, 4]])
    r = torch.randn(2, 3, 5) * 2
    m = torch.randn(2, 5, 4)
    idx = torch.tensor([3, 0])
    layers = Layers().eval()
    cases = {"elementwise": (Elementwise(), (x, y, n)), "reductions": (Reductions(), (r,)),
             "layers": (layers, (img, seq, tokens)), "movement": (Movement(), (m, idx))}
    programs = {name: export(model, args) for name, (model, args) in cases.items()}
    program = to_edge(programs).to_executorch()
    arrays = {}
    with torch.no_grad():
        for name, (model, args) in cases.items():
            for i, t in enumerate(args):
                arrays[f"{name}_call0_in{i}"] = t
            for j, t in enumerate(model(*args)):
                arrays[f"{name}_call0_out{j}"] = t
    _save(out_dir, "ops", program.buffer, arrays)


def export_dynamic(out_dir: str) -> None:
    """Dynamic batch (torch.export Dim, up to 8): an MLP and a small CNN whose flatten becomes
    sym_size + et_view; run with several batch sizes."""
    from torch.export import Dim

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(-1)).eval()
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 2)).eval()
    batch = Dim("batch", min=1, max=8)
    for name, model, example, sizes in (("mlp_dynamic", mlp, torch.randn(4, 6), (3, 8, 1)),
                                        ("cnn_dynamic", cnn, torch.randn(2, 3, 8, 8), (1, 8, 5))):
        program = to_edge(export(model, (example,), dynamic_shapes=({0: batch},))).to_executorch()
        arrays = {}
        with torch.no_grad():
            for k, n in enumerate(sizes):
                x = torch.randn(n, *example.shape[1:])
                arrays[f"forward_call{k}_in0"] = x
                arrays[f"forward_call{k}_out0"] = model(x)
        _save(out_dir, name, program.buffer, arrays)


def export_delegated(out_dir: str) -> None:
    """A linear layer lowered to XNNPACK: the importer must refuse it, naming the delegate."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    x = torch.randn(2, 4)
    program = to_edge_transform_and_lower(export(model, (x,)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    with open(os.path.join(out_dir, "delegated.pte"), "wb") as f:
        f.write(program.buffer)
    print(f"wrote delegated.pte ({len(program.buffer)} bytes)")


def _save(out_dir: str, name: str, program_buffer: bytes, arrays: dict) -> None:
    with open(os.path.join(out_dir, name + ".pte"), "wb") as f:
        f.write(program_buffer)
    np.savez(os.path.join(out_dir, name + ".npz"),
             **{k: v.detach().contiguous().numpy() for k, v in arrays.items()})
    print(f"wrote {name}.pte ({len(program_buffer)} bytes) and {name}.npz")


def _export_single(out_dir: str, name: str, model: nn.Module, inputs: tuple,
                   eager_inputs: tuple = None) -> None:
    model.eval()
    with torch.no_grad():
        reference = model(*(eager_inputs or inputs))
    program = to_edge(export(model, inputs)).to_executorch()
    arrays = {f"forward_call0_in{i}": x for i, x in enumerate(inputs)}
    outs = reference if isinstance(reference, tuple) else (reference,)
    arrays.update({f"forward_call0_out{j}": y for j, y in enumerate(outs)})
    _save(out_dir, name, program.buffer, arrays)


def export_mobilenet(out_dir: str) -> None:
    torch.manual_seed(0)
    model = MobileNetBlock()
    with torch.no_grad():  # non-trivial running statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.randn(1, 3, 32, 32)
    _export_single(out_dir, "mobilenet", model, (x,))
    torch.onnx.export(model, (x,), os.path.join(out_dir, "mobilenet.onnx"),
                      input_names=["x"], output_names=["y"], opset_version=18, dynamo=True,
                      external_data=False)
    print("wrote mobilenet.onnx")


def export_lstm(out_dir: str) -> None:
    torch.manual_seed(0)
    _export_single(out_dir, "lstm", LSTMModel(), (torch.randn(2, 5, 6),))


def export_two_methods(out_dir: str) -> None:
    torch.manual_seed(0)
    encoder, decoder = Encoder(nn.Linear(6, 4)).eval(), Decoder(nn.Linear(4, 6)).eval()
    x, z, scale = torch.randn(3, 6), torch.randn(3, 4), torch.rand(6) + 0.5
    programs = {"forward": export(encoder, (x,)), "decode": export(decoder, (z, scale))}
    program = to_edge(programs).to_executorch()
    with torch.no_grad():
        arrays = {"forward_call0_in0": x, "forward_call0_out0": encoder(x),
                  "decode_call0_in0": z, "decode_call0_in1": scale,
                  "decode_call0_out0": decoder(z, scale)}
    _save(out_dir, "two_methods", program.buffer, arrays)


def export_counter(out_dir: str) -> None:
    torch.manual_seed(0)
    model = Counter().eval()
    xs = [torch.randn(4) for _ in range(3)]
    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["total"])],
                                     emit_mutable_buffer_names=True)
    program = to_edge(export(Counter().eval(), (xs[0],))).to_executorch(config)
    arrays = {}
    with torch.no_grad():
        for k, x in enumerate(xs):
            arrays[f"forward_call{k}_in0"] = x
            arrays[f"forward_call{k}_out0"] = model(x).clone()
    _save(out_dir, "counter", program.buffer, arrays)


def export_channels_last(out_dir: str) -> None:
    """A channels-last input; and a model converted to channels-last (its convolution
    weights are then stored in dim order (0, 2, 3, 1) in the .pte)."""
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 5).to(memory_format=torch.channels_last)
    _export_single(out_dir, "channels_last", ChannelsLast(), (x,))
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3))
    model = model.eval().to(memory_format=torch.channels_last)
    _export_single(out_dir, "channels_last_weights", model, (torch.randn(1, 4, 6, 6).to(
        memory_format=torch.channels_last),))


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "executorch")
    os.makedirs(out_dir, exist_ok=True)
    only = sys.argv[2:]
    for export_one in (export_mobilenet, export_lstm, export_two_methods, export_counter,
                       export_channels_last, export_ops, export_more, export_kv_cache,
                       export_dynamic, export_delegated):
        if not only or export_one.__name__[len("export_"):] in only:
            export_one(out_dir)


if __name__ == "__main__":
    main()
