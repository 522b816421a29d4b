"""Check that two checkouts' exporters write the same bytes for the same logs.

Why: a change meant to make an export faster must not change a single byte of what it
writes (the dataset digest is recorded in the log; ``WRITER_VERSION`` names the bytes). This
script collects two demo runs once (state-only and with cameras, 4 batches x 4 episodes)
into a fixture folder, then, with the exporter of the checkout it is run from, writes from
those logs: a one-shot LeRobot export, a live-style one built up after 2, 3 and 4 batches in
one process, one built after 2 batches and then after all of them in two processes (the
second parses the first version from disk), and a robomimic file; and prints every file's
SHA-256 as JSON. Run it from both checkouts on the same fixture and compare the outputs.

Run::

    .venv/bin/python scripts/export_bytes_check.py make FIXTURE
    .venv/bin/python scripts/export_bytes_check.py export FIXTURE > mine.json
    .venv/bin/python scripts/export_bytes_check.py --repo OTHER export FIXTURE > theirs.json
    cmp mine.json theirs.json

(``--repo OTHER``: that checkout's exporter, with this venv's libraries.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _hashes(root: Path) -> dict[str, str]:
    real = Path(os.path.realpath(root))
    if real.is_file():
        return {real.name: hashlib.sha256(real.read_bytes()).hexdigest()}
    return {p.relative_to(real).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(real.rglob("*")) if p.is_file()}


def _source(store: Any, run_id: str, batches: int | None) -> Any:
    """The run's dataset source as its log stood when ``batches`` batches had finished."""
    from runtime.export.episodes import dataset_source, run_source

    events = store.read(run_id)
    if batches is not None:
        ends = [n for n, e in enumerate(events)
                if e.type == "BatchFinished" and e.payload.get("batch_index") == batches - 1]
        events = events[: ends[0] + 1]
    return dataset_source([run_source(run_id, events)])


def _make(fixture: Path) -> None:
    from runtime.collection import collect
    from runtime.collection.demo_run import prepare_demo_run, write_catalog
    from store import EventStore

    fixture.mkdir(parents=True)
    store = EventStore(f"sqlite:///{fixture / 'runs.db'}")
    catalog = write_catalog(fixture / "catalog")
    ids = {}
    for kind, cameras in (("state", False), ("cameras", True)):
        ids[kind] = prepare_demo_run(store, fixture / f"run-{kind}", catalog, batches=4,
                                     episodes_per_batch=4, settle_steps=10, cameras=cameras)
        collect(ids[kind], store=store, progress=False)
    (fixture / "runs.json").write_text(json.dumps(ids))


def _build(fixture: Path, kind: str, out: Path, batches: int | None, fmt: str) -> dict[str, str]:
    from runtime.export.dataset import DatasetSpec, build_version
    from store import EventStore

    store = EventStore(f"sqlite:///{fixture / 'runs.db'}")
    run_id = json.loads((fixture / "runs.json").read_text())[kind]
    build_version(DatasetSpec(fmt, out), _source(store, run_id, batches))
    return _hashes(out)


def _export(fixture: Path, repo: Path) -> dict[str, dict[str, str]]:
    work = Path(tempfile.mkdtemp(prefix="export-bytes-"))
    result: dict[str, dict[str, str]] = {}
    try:
        for kind in json.loads((fixture / "runs.json").read_text()):
            result[f"{kind}: one-shot"] = _build(fixture, kind, work / f"one-{kind}", None,
                                                 "lerobot")
            for batches in (2, 3, None):
                result[f"{kind}: live, after {batches or 4} batches"] = _build(
                    fixture, kind, work / f"live-{kind}", batches, "lerobot")
            for batches in ("2", "all"):
                text = subprocess.run(
                    [sys.executable, __file__, "--repo", str(repo), "build", str(fixture), kind,
                     str(work / f"two-{kind}"), batches],
                    check=True, capture_output=True, text=True,
                ).stdout
                result[f"{kind}: new process, after {batches} batches"] = json.loads(text)
            result[f"{kind}: robomimic"] = _build(fixture, kind, work / f"rm-{kind}.hdf5", None,
                                                  "robomimic")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose exporter runs (default: this script's)")
    parser.add_argument("command", choices=["make", "export", "build"])
    parser.add_argument("fixture", type=Path)
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args()
    sys.path.insert(0, str(args.repo.resolve()))
    os.environ.setdefault("MUJOCO_GL", "egl")
    from runtime.logging import configure_logging

    configure_logging(level="warning")
    if args.command == "make":
        _make(args.fixture)
    elif args.command == "build":
        kind, out, batches = args.rest
        hashes = _build(args.fixture, kind, Path(out), None if batches == "all" else int(batches),
                        "lerobot")
        sys.stdout.write(json.dumps(hashes) + "\n")
    else:
        sys.stdout.write(json.dumps(_export(args.fixture, args.repo), indent=1, sort_keys=True)
                         + "\n")


if __name__ == "__main__":
    main()
