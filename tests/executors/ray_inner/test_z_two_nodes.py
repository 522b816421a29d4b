"""Two Ray nodes on loopback (``ray.cluster_utils.Cluster``), joined with ``ray_address``
as ``--ray-address`` does: the workers land on different nodes, each in a working directory
of its own (never the driver's output folder), and collect what one worker collects.
Named to run last: it replaces the session's local Ray instance with the cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.collection import collect
from runtime.collection.executors.ray import RayExecutor
from tests.executors.ray_inner.conftest import assert_logged_once_and_legal, prepared_run, results


def test_two_nodes_with_separate_working_directories_agree_with_one_worker(
    reference: dict, catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    seen: list[dict[str, dict[str, Any]]] = []
    real_close = RayExecutor.close

    def close_after_looking(self: RayExecutor) -> None:
        seen.append(self.worker_identities())
        real_close(self)

    monkeypatch.setattr(RayExecutor, "close", close_after_looking)
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        store, run_id, out = prepared_run(tmp_path, catalog)
        collect(run_id, store=store, progress=False, workers=2, ray_address=cluster.address)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert results(store, run_id) == reference
    assert_logged_once_and_legal(store, run_id, out)
    [workers] = seen
    assert len({w["node_id"] for w in workers.values()}) == 2, workers
    cwds = {w["cwd"] for w in workers.values()}
    assert len(cwds) == 2 and not any(c.startswith(str(out)) for c in cwds), cwds
