"""Batch inference over a Dask LocalCluster of worker processes: the Module travels by pickle
(once per worker, with scatter), every batch's result comes back and must equal a local run.
Skips where dask.distributed is absent (PyPy: psutil has no wheel there)."""
from __future__ import annotations

import os

import pytest

distributed = pytest.importorskip("distributed")
np = pytest.importorskip("numpy")

import runtime_py as rt  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES = 16, 32, 64, 10


def mlp(seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    b = ProgramBuilder()
    m = b.method("forward")
    h = m.input("x", "float32", (BATCH, FEATURES))
    for i, (o, k) in enumerate([(HIDDEN, FEATURES), (CLASSES, HIDDEN)]):
        w = (rng.standard_normal((o, k)) / np.sqrt(k)).astype(np.float32)
        h = m.linear(h, m.constant(w, name=f"fc{i}.weight"),
                     m.constant(rng.standard_normal(o).astype(np.float32), name=f"fc{i}.bias"))
        if i == 0:
            h = m.relu(h)
    m.output(m.softmax(h, axis=-1), "probs")
    return b.to_bytes()


def infer(module: rt.Module, batch: np.ndarray) -> np.ndarray:
    """Runs on a worker: the module arrived by pickle (its bytes), its method loads lazily."""
    (probs,) = module.forward(batch)
    return np.asarray(probs)


@pytest.mark.parametrize("by_path", [False, True], ids=["bytes", "path"])
def test_batch_inference_on_a_local_cluster(tmp_path, by_path):
    data = mlp()
    source = data
    if by_path:
        source = tmp_path / "mlp.rtp"
        source.write_bytes(data)
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((BATCH, FEATURES)).astype(np.float32) for _ in range(12)]
    local = rt.load(source)
    expected = [infer(local, x) for x in batches]

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        module = client.scatter(rt.load(source), broadcast=True)
        futures = client.map(infer, [module] * len(batches), batches, pure=False)
        results = client.gather(futures)
        worker_pids = set(client.run(os.getpid).values())

    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert got.shape == (BATCH, CLASSES) and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
