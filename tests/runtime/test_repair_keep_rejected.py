"""Trajectory provenance (run and task ids), `--keep-rejected` and `resume --repair`."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from domain.canonical import sha256_hex
from domain.task import CheckSpec
from runtime.collection import collect, default_environment_factory
from runtime.collection.repair import RepairRefused
from runtime.resume import RepairResult, RunDataAltered, resume
from runtime.verify import verify_events
from store.projections.forensics import forensics
from tests.cli_logging import reset_cli_logging  # noqa: F401
from tests.runtime.demo_runs import prepared


def _commits(store: Any, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.read(run_id) if e.type == "TrajectoryCommitted"]


@pytest.fixture
def collected(store: Any, tmp_path: Path, catalog: Path) -> tuple[str, Path]:
    out = tmp_path / "out"
    run_id = prepared(store, out, catalog, batches=1, episodes_per_batch=2, seed=8)
    collect(run_id, store=store, progress=False)
    assert _commits(store, run_id), "the demo seed should commit an episode"
    return run_id, out


def test_every_trajectory_names_its_run_and_task(store: Any, collected: tuple[str, Path]) -> None:
    run_id, out = collected
    for receipt in _commits(store, run_id):
        payload = torch.load(out / receipt["path"], weights_only=True)
        metadata = json.loads(payload["metadata"])
        assert metadata["run_id"] == run_id
        assert metadata["task_id"] == "place_item_in_bin"


def test_repair_restores_a_deleted_trajectory_and_camera_file_bit_for_bit(
    store: Any, collected: tuple[str, Path]
) -> None:
    run_id, out = collected
    receipt = _commits(store, run_id)[-1]
    trajectory = out / receipt["path"]
    camera = out / receipt["files"][0]["path"]
    originals = {trajectory: trajectory.read_bytes(), camera: camera.read_bytes()}
    trajectory.unlink()
    camera.write_bytes(b"corrupt")
    version = store.state(run_id).version
    assert verify_events(run_id, store.read(run_id)).problems  # verify sees the damage
    result = resume(run_id, store=store, repair=True, progress=False)
    assert isinstance(result, RepairResult)
    [episode] = result.restored
    assert (episode.batch_index, episode.episode_index) == (
        receipt["batch_index"], receipt["episode_index"]
    )
    assert set(episode.paths) == {trajectory, camera}
    for path, data in originals.items():
        assert path.read_bytes() == data
    # One event records the repair; it names only bytes the log already vouched for.
    assert store.state(run_id).version == version + 1 == result.seq
    repaired = store.read(run_id)[-1]
    assert repaired.type == "CommittedFilesRepaired"
    key = (receipt["batch_index"], receipt["episode_index"])
    started = next(
        e.payload for e in store.read(run_id)
        if e.type == "EpisodeStarted" and (e.payload["batch_index"], e.payload["episode_index"])
        == key
    )
    deployment = next(e.payload for e in store.read(run_id) if e.type == "DeploymentMaterialized")
    session_id = repaired.payload["session_id"]
    assert session_id not in {
        e.payload["session_id"] for e in store.read(run_id) if e.type == "CollectionStarted"
    }
    assert {k: repaired.payload[k] for k in ("host", "pid")} == {
        "host": socket.gethostname(), "pid": os.getpid(),
    }
    camera_entry = receipt["files"][0]
    assert repaired.payload["episodes"] == [{
        "batch_index": key[0],
        "episode_index": key[1],
        "seed": started["seed"],
        "deployment_path": deployment["deployment_path"],
        "manifest_sha256": deployment["manifest_sha256"],
        "files": [
            {"what": "trajectory", "path": receipt["path"], "bytes": receipt["bytes"],
             "sha256": receipt["sha256"], "found": None},
            {"what": f"camera file ({camera_entry['camera']} {camera_entry['modality']})",
             "path": camera_entry["path"], "bytes": camera_entry["bytes"],
             "sha256": camera_entry["sha256"],
             "found": {"bytes": 7, "sha256": sha256_hex(b"corrupt")}},
        ],
    }]
    assert verify_events(run_id, store.read(run_id)).problems == []
    report = forensics(store.read(run_id))
    assert [r["seq"] for r in report["repairs"]] == [result.seq]


def _perturbed_factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> Any:
    """The simulator, but settling one step more after each reset: a changed environment."""
    return default_environment_factory(deployment_dir, seed=seed, settle_steps=settle_steps + 1)


def test_repair_refuses_when_the_regenerated_file_differs(
    store: Any, collected: tuple[str, Path]
) -> None:
    run_id, out = collected
    receipt = _commits(store, run_id)[-1]
    trajectory = out / receipt["path"]
    trajectory.unlink()
    version = store.state(run_id).version
    b, e = receipt["batch_index"], receipt["episode_index"]
    name = trajectory.name
    with pytest.raises(RepairRefused) as error:
        resume(run_id, store=store, repair=True, environment_factory=_perturbed_factory,
               progress=False)
    assert re.fullmatch(
        rf"run {run_id}: batch {b} episode {e}: the regenerated trajectory {name} has "
        rf"SHA-256 [0-9a-f]{{64}}, the log recorded {receipt['sha256']}; nothing restored",
        str(error.value),
    ), str(error.value)
    assert not trajectory.exists()  # nothing written
    assert store.state(run_id).version == version  # nothing recorded
    assert not [p for p in trajectory.parent.iterdir() if p.name.endswith(".tmp")]


def test_repair_refuses_an_altered_deployment_before_regenerating(
    store: Any, collected: tuple[str, Path]
) -> None:
    run_id, out = collected
    receipt = _commits(store, run_id)[-1]
    (out / receipt["path"]).unlink()
    task = out / "batch_0000" / "task.yaml"
    task.write_text(task.read_text().replace("yaw_deg: 0", "yaw_deg: 5", 1))
    with pytest.raises(RunDataAltered, match=r"batch_0000.*task\.yaml"):
        resume(run_id, store=store, repair=True, progress=False)
    assert not (out / receipt["path"]).exists()


def test_keep_rejected_keeps_rejected_files_with_receipts(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    never_at_rest = (CheckSpec("at_rest", params={"linear_m_s": -1.0}),)  # rejects every one
    out = tmp_path / "kept"
    run_id = prepared(store, out, catalog, batches=1, episodes_per_batch=1, seed=8)
    collect(run_id, store=store, final_checks=never_at_rest, keep_rejected=True, progress=False)
    [discarded] = [e.payload for e in store.read(run_id) if e.type == "TrajectoryDiscarded"]
    assert discarded["reason"] == "final_checks_failed"
    session = next(e.payload for e in store.read(run_id) if e.type == "CollectionStarted")
    kept = discarded["kept"]
    assert kept[0]["modality"] == "trajectory" and kept[0]["camera"] is None
    assert kept[0]["path"] == f"rejected/run_{session['session_id']}/b0000_e0000.pt"
    assert {k["modality"] for k in kept[1:]} >= {"rgb", "metadata"}  # its camera files
    from domain.canonical import sha256_hex

    for entry in kept:
        data = (out / entry["path"]).read_bytes()
        assert (len(data), sha256_hex(data)) == (entry["bytes"], entry["sha256"])
    metadata = json.loads(torch.load(out / kept[0]["path"], weights_only=True)["metadata"])
    assert metadata["run_id"] == run_id
    assert not list((out / "recordings").rglob("*.pt"))  # nothing was committed
    # without the flag, nothing is kept
    plain = tmp_path / "plain"
    other = prepared(store, plain, catalog, batches=1, episodes_per_batch=1, seed=8)
    collect(other, store=store, final_checks=never_at_rest, progress=False)
    [discarded] = [e.payload for e in store.read(other) if e.type == "TrajectoryDiscarded"]
    assert "kept" not in discarded and not (plain / "rejected").exists()


def test_cli_resume_repair_restores_then_refuses_altered_inputs(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.cli import main
    from store import EventStore

    url = f"sqlite:///{tmp_path / 'r.db'}"
    out = tmp_path / "out"
    with EventStore(url) as store:
        run_id = prepared(store, out, catalog, batches=1, episodes_per_batch=1, seed=8,
                          cameras=False)
        collect(run_id, store=store, progress=False)
        [receipt] = _commits(store, run_id)
    trajectory = out / receipt["path"]
    original = trajectory.read_bytes()
    trajectory.unlink()
    argv = ["resume", run_id, "--repair", "--db", url, "--no-progress"]
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"restored batch 0 episode 0: {trajectory} (SHA-256 as logged)"
    ]
    assert trajectory.read_bytes() == original
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"run {run_id}: every committed file is intact; nothing to repair"
    ]
    manifest = out / "batch_0000" / "manifest.json"
    manifest.write_text(manifest.read_text() + " ")
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("assetcast")]
    assert len(err) == 1 and err[0].startswith(f"assetcast: error: run {run_id}: ")
    assert err[0].endswith("; refusing to resume (see `assetcast verify`)")


def test_repair_then_resume_finishes_an_interrupted_run(
    store: Any, tmp_path: Path, catalog: Path
) -> None:
    from tests.runtime.test_resume import interrupted_run

    run_id = interrupted_run(store, tmp_path / "out", catalog, at_program=4)
    receipt = _commits(store, run_id)[0]
    path = tmp_path / "out" / receipt["path"]
    original = path.read_bytes()
    path.unlink()
    resume(run_id, store=store, repair=True, progress=False)
    assert path.read_bytes() == original
    assert store.state(run_id).state == "completed"
    assert verify_events(run_id, store.read(run_id)).problems == []


def test_cli_resume_repair_checks_once_and_records_the_repair(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an interrupted run, `resume --repair` restores a deleted trajectory and finishes
    the run in one session; the chain check, the inputs check and each committed file's hash
    happen exactly once; `events` and `forensics` show what the repair did."""
    import runtime.collection.recordings as recordings_module
    import runtime.collection.repair_scan as repair_scan_module
    import runtime.files as files_module
    import runtime.verify as verify_module
    from runtime.cli import main
    from store import EventStore
    from tests.runtime.test_resume import interrupted_run

    url = f"sqlite:///{tmp_path / 'r.db'}"
    out = tmp_path / "out"
    with EventStore(url) as store:
        run_id = interrupted_run(store, out, catalog, at_program=4)
        receipts = _commits(store, run_id)
    committed = {
        (out / str(entry["path"])).resolve()
        for receipt in receipts for entry in [receipt, *receipt.get("files", [])]
    }
    deleted = (out / receipts[0]["path"]).resolve()
    original = deleted.read_bytes()
    deleted.unlink()

    chains: list[str] = []
    real_chain = EventStore.require_intact_chain

    def counted_chain(self: Any, checked: str) -> Any:
        chains.append(checked)
        return real_chain(self, checked)

    inputs: list[str] = []
    real_verify = verify_module.verify_events

    def counted_verify(checked: str, events: Any, **kwargs: Any) -> Any:
        inputs.append(checked)
        return real_verify(checked, events, **kwargs)

    hashed: dict[Path, int] = {}
    real_sha = files_module.file_sha256

    def counted_sha(path: Path) -> str:
        resolved = Path(path).resolve()
        hashed[resolved] = hashed.get(resolved, 0) + 1
        return real_sha(path)

    monkeypatch.setattr(EventStore, "require_intact_chain", counted_chain)
    monkeypatch.setattr(verify_module, "verify_events", counted_verify)
    for module in (files_module, recordings_module, repair_scan_module):
        monkeypatch.setattr(module, "file_sha256", counted_sha)
    capsys.readouterr()
    assert main(["resume", run_id, "--repair", "--db", url, "--no-progress"]) == 0
    printed = capsys.readouterr().out.splitlines()
    b, e = receipts[0]["batch_index"], receipts[0]["episode_index"]
    assert printed[0] == (
        f"restored batch {b} episode {e}: {out / receipts[0]['path']} (SHA-256 as logged)"
    )
    assert deleted.read_bytes() == original
    assert chains == [run_id]
    assert inputs == [run_id]
    assert {p: n for p, n in hashed.items() if p in committed} == {
        p: 1 for p in committed - {deleted}
    }
    monkeypatch.undo()

    with EventStore(url) as store:
        events = store.read(run_id)
    types = [e.type for e in events]
    repair_at = types.index("CommittedFilesRepaired")
    resumed = events[repair_at + 1]
    assert resumed.type == "RunResumed"
    repair = events[repair_at].payload
    assert repair["session_id"] == resumed.payload["session_id"]  # one session for both
    assert [(x["batch_index"], x["episode_index"]) for x in repair["episodes"]] == [(b, e)]
    assert [f["path"] for f in repair["episodes"][0]["files"]] == [receipts[0]["path"]]
    assert types[-1] == "RunCompleted"

    assert main(["events", run_id, "--db", url, "--type", "CommittedFilesRepaired"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert f"{events[repair_at].seq:>5}" in line and "CommittedFilesRepaired" in line
    assert main(["forensics", run_id, "--db", url]) == 0
    repaired_lines = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("repaired ")
    ]
    assert repaired_lines == [
        f"repaired #{events[repair_at].seq} by session {repair['session_id']}: batch {b} "
        f"episode {e} trajectory {receipts[0]['path']} (was missing; re-run with seed "
        f"{repair['episodes'][0]['seed']} from {repair['episodes'][0]['deployment_path']})"
    ]
    # Every other reader of the log takes the repair in its stride.
    for command in (["show", run_id], ["show", run_id, "--json"], ["audit"], ["verify", run_id],
                    ["runs"]):
        assert main([*command, "--db", url]) == 0, command
