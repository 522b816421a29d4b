"""History that does not slow down: `runs`, `show`, `forensics` and resume at 10k, 100k, 1M events.

One real prepared run (the demo catalog, 4 batches, real deployments) is extended with a
synthetic but legal collection history (``--no-record`` style episodes with realistic check
payloads): a generator bulk-inserts the event rows through the store's own compiled insert,
``rebuild_snapshots`` then folds the whole log (checking it is legal) and writes the
snapshots, and a last ordinary ``append`` writes the ``runs`` row's counts. Databases are
cached under
``/tmp/assetcast-bench-history-v<GENERATOR_VERSION>-<schema head>/``.

Each figure is measured in a fresh subprocess (nothing cached in memory): the command's own
time after imports, its wall time including interpreter start-up, and its peak RSS. Resume
is timed from the ``resume()`` call to the environment factory being called (the child
exits there). Goals at 1M events: runs < 0.3 s, show/forensics < 1 s, resume < 2 s, peak
memory < 300 MB, and flat growth. Then read-only start-up wall time vs ``python -c pass``
(goal < 0.4 s more).

``--sizes 10000,100000`` limits the sizes (the default is all three).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GENERATOR_VERSION = 4  # 4: bulk rows carry their chain hashes (issue 13)


def _cache_dir() -> Path:
    """Keyed by the generator and the schema (a cached DB of another schema is useless)."""
    from store.admin import head_revision

    return Path(f"/tmp/assetcast-bench-history-v{GENERATOR_VERSION}-{head_revision()}")


CACHE = _cache_dir()
SIZES = (10_000, 100_000, 1_000_000)
BULK_CHUNK = 50_000
EPISODES_PER_BATCH = 10**6  # the last batch never fills up: one episode is always pending


def _quiet() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _checks(passed: bool) -> list[dict]:
    names = ("at_rest", "upright", "on_table", "no_penetration")
    return [
        {"name": n, "status": "passed" if passed else "failed", "detail": "",
         "metrics": {"speed_m_s": 0.0012, "tilt_deg": 0.4}}
        for n in names
    ]


def _episode(b: int, e: int) -> list[tuple[str, dict]]:
    k = {"batch_index": b, "episode_index": e}
    accepted = e % 4 != 0
    return [
        ("EpisodeStarted", {**k, "seed": (b * 7919 + e) % 2**32}),
        ("InitialChecked", {**k, "passed": True, "checks": _checks(True)}),
        ("EpisodeExecuted", {**k, "completed": True, "steps": 812, "detail": "",
                             "skills": [{"skill": "pick", "object": "item", "completed": True},
                                        {"skill": "place", "object": "item",
                                         "completed": True}]}),
        ("EpisodeJudged", {**k, "accepted": accepted, "reason": (
            "accepted" if accepted else "final_checks_failed"),
            "checks": [{"name": "inside_region", "status": "passed" if accepted else "failed",
                        "detail": "", "metrics": {"margin_m": 0.004}}]}),
        ("TrajectoryDiscarded", {**k, "reason": (
            "recording_disabled" if accepted else "final_checks_failed")}),
        ("ResetSubmitted", dict(k)),
    ]


def _copy_db(source: Path, target: Path) -> None:
    """A consistent copy through SQLite's backup API: a file copy would miss whatever still
    sits in the source's ``-wal`` file."""
    import sqlite3

    target.unlink(missing_ok=True)
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as src, \
            sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def _base(root: Path) -> tuple[Path, str]:
    """A real prepared run (demo catalog, 4 deployments): its DB file and run id."""
    marker = root / "base.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        return Path(info["db"]), info["run_id"]
    from domain.config import CollectionConfig
    from runtime.assets.demo_catalog import write_demo_catalog
    from runtime.assets.providers import DirectoryAssetProvider
    from runtime.prepare import prepare
    from store import EventStore

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    write_demo_catalog(root / "catalog")
    provider = DirectoryAssetProvider(root / "catalog")
    db = root / "base.db"
    with EventStore(f"sqlite:///{db}") as store:
        result = prepare(
            REPO / "runtime" / "demo" / "task.yaml", {"item": provider, "bin": provider},
            cfg=CollectionConfig(seed=0, max_batches=4, episodes_per_batch=EPISODES_PER_BATCH),
            output_dir=root / "run", store=store,
        )
    marker.write_text(json.dumps({"db": str(db), "run_id": result.run_id}))
    return db, result.run_id


def _build(size: int) -> tuple[Path, str, float]:
    """The DB with ``size`` events in the run (cached); returns path, run id, build seconds."""
    base_db, run_id = _base(CACHE)
    db = CACHE / f"events-{size}.db"
    if db.exists():
        return db, run_id, _ensure_snapshots(db, run_id)
    import sqlalchemy as sa

    from domain.canonical import canonical_json
    from domain.chain import chain_hashes, time_text
    from domain.events import SCHEMA_VERSION
    from store import EventStore, NewEvent
    from store.records import utcnow

    started = time.perf_counter()
    tmp = db.with_suffix(".tmp")
    _copy_db(base_db, tmp)
    with EventStore(f"sqlite:///{tmp}") as store:
        version = store.state(run_id).version
        batches = sorted(store.state(run_id).batches)
        pending: list[NewEvent] = [
            NewEvent("CollectionStarted", {
                "session_id": "bench0000001", "host": "bench", "pid": 1,
                "episodes_per_batch": EPISODES_PER_BATCH, "record_trajectory": False,
                "recording_dir": None,
            }),
            NewEvent("EnvironmentBuilt", {
                "session_id": "bench0000001", "batch_index": batches[0], "constructions": 1,
            }),
        ]
        state = store.state(run_id)
        per_batch = max(1, (size - version) // 6 // len(batches))
        remaining = size - version - len(pending)

        head = store._hash_at(run_id, version)

        def flush() -> None:
            """Bulk-insert all but the last episode's events (kept for the final append),
            chained like an append would chain them."""
            nonlocal version, head
            now = utcnow()
            texts = [(e.type, canonical_json(e.payload)) for e in pending[:-6]]
            links = chain_hashes(
                run_id, version + 1, head, time_text(now), SCHEMA_VERSION, texts
            )
            rows = [
                (version + i + 1, event_type, text, prev_hash, digest)
                for i, ((event_type, text), (prev_hash, digest)) in enumerate(
                    zip(texts, links, strict=True)
                )
            ]
            with store._writer.connect() as conn, conn.begin():
                store._sql.insert_events.execute_rows(
                    conn, {"run_id": run_id, "recorded_at": now,
                           "schema_version": SCHEMA_VERSION},
                    ("seq", "type", "payload", "prev_hash", "hash"), rows,
                )
                version += len(rows)
                head = rows[-1][4]
                conn.execute(
                    sa.text("UPDATE runs SET version = :v, state = 'collecting', "
                            "head_hash = :h WHERE run_id = :r"),
                    {"v": version, "h": head, "r": run_id},
                )
            del pending[:-6]

        for position, b in enumerate(batches):
            batch = state.batches[b]
            pending.append(NewEvent("BatchStarted", {
                "batch_index": b, "asset_set_id": batch.asset_set_id, "seed": batch.seed,
                "deployment_path": batch.deployment["deployment_path"],
            }))
            remaining -= 1
            last = position == len(batches) - 1
            e = 0
            while (remaining >= 6 + (0 if last else 1)) and (last or e < per_batch):
                for event_type, payload in _episode(b, e):
                    pending.append(NewEvent(event_type, payload))
                remaining -= 6
                e += 1
                if len(pending) >= BULK_CHUNK:
                    flush()
            if not last:
                pending.append(NewEvent("BatchFinished", {
                    "batch_index": b, "accepted": 0, "attempted": e,
                }))
                remaining -= 1
        store.rebuild_snapshots([run_id])  # folds the bulk-inserted log: refuses an illegal one
        store.append(run_id, pending, expected_version=version)  # and the runs row's counts
    os.replace(tmp, db)
    return db, run_id, time.perf_counter() - started


def _ensure_snapshots(db: Path, run_id: str) -> float:
    """A cached log keeps its events; its snapshots are rebuilt when the code writes another
    fold or projection version, or a kind (the chain anchor, a projection) is missing
    (seconds spent, 0 if nothing to do)."""
    import sqlite3

    from domain.state_codec import FOLD_SNAPSHOT_VERSION
    from store import EventStore
    from store.projections.incremental import snapshotted
    from store.snapshots import CHAIN_KIND, FOLD_KIND

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        kinds = dict(conn.execute(
            "SELECT kind, projection_version FROM snapshots WHERE run_id = ?", (run_id,)
        ).fetchall())
    wanted = {kind: cls.VERSION for kind, cls in snapshotted().items()}
    wanted[FOLD_KIND] = FOLD_SNAPSHOT_VERSION
    if CHAIN_KIND in kinds and all(kinds.get(k) == v for k, v in wanted.items()):
        return 0.0
    started = time.perf_counter()
    with EventStore(f"sqlite:///{db}") as store:
        store.rebuild_snapshots([run_id])
    return time.perf_counter() - started


TAIL = 5_000  # events after the last snapshot: about half an interval, the typical case


def _with_tail(db: Path, run_id: str) -> Path:
    """A copy of ``db`` with ``TAIL`` more episode events that cross no snapshot boundary, so
    every figure pays for folding a realistic tail, not for a snapshot that is exactly current."""
    from store import EventStore, NewEvent

    copy = db.with_name(db.stem + "-tail.db")
    _copy_db(db, copy)
    with EventStore(f"sqlite:///{copy}", snapshot_every=0) as store:
        state = store.state(run_id)
        batch = max(b for b, _e in state.episodes)
        first = 1 + max(e for b, e in state.episodes if b == batch)
        events = [
            NewEvent(t, p) for e in range(first, first + TAIL // 6) for t, p in _episode(batch, e)
        ]
        store.append(run_id, events, expected_version=state.version)
    return copy


def _tail(db: Path, run_id: str) -> str:
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        version = conn.execute("SELECT version FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        snap = conn.execute(
            "SELECT seq, length(body) FROM snapshots WHERE run_id = ? AND kind = 'fold'",
            (run_id,),
        ).fetchone()
    if snap is None:
        return "no fold snapshot"
    return (f"fold snapshot at seq {snap[0]} ({snap[1] / 1e6:.1f} MB), "
            f"tail {version[0] - snap[0]} events")


# -- children (fresh processes) ---------------------------------------------------------

def _peak_mb() -> float:
    """This process's own RSS high-water mark (VmHWM: ru_maxrss would include the parent's,
    Linux keeps it across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_cli(argv: list[str]) -> None:
    _quiet()
    from runtime.cli.entry_point import main

    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the child
    sys.stdout = devnull
    started = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - started
    sys.stdout = sys.__stdout__
    print(json.dumps({"seconds": elapsed, "peak_mb": _peak_mb(), "code": code}))


def _child_resume(db: str, run_id: str) -> None:
    _quiet()
    from runtime.resume import resume
    from store import EventStore

    store = EventStore(f"sqlite:///{db}")
    started = time.perf_counter()

    def factory(deployment_dir: Path, *, seed: int, settle_steps: int) -> object:
        elapsed = time.perf_counter() - started
        print(json.dumps({"seconds": elapsed, "peak_mb": _peak_mb(), "code": 0}), flush=True)
        os._exit(0)

    resume(run_id, store=store, environment_factory=factory, progress=False)
    raise SystemExit("resume finished without calling the environment factory")


REPORTS = {  # the small one first: the big report's heap would slow its GC passes
    "preparation.report.json": ("preparation_report", "store.projections.preparation_report"),
    "report.json": ("collection_report", "store.projections.collection_report"),
}


def _child_report(mode: str, db: str, run_id: str) -> None:
    """Build both session-end reports as the collector writes them: from the whole log
    (``full``: the projection then ``report_text``), or as the session end does
    (``incremental``: ``report.json`` streamed from the stored head + chunks + tail by
    ``runtime.collection.results.write_report``, the preparation report from its snapshot +
    tail). Each file's SHA-256 is returned so the two can be compared."""
    _quiet()
    import hashlib
    import importlib
    import tempfile

    from runtime.collection.results import write_report
    from runtime.files import file_sha256, report_text
    from store import EventStore
    from store.gc_pause import gc_paused

    store = EventStore(f"sqlite:///{db}")
    out: dict = {"code": 0}
    for name, (kind, module) in REPORTS.items():
        full = getattr(importlib.import_module(module), kind)
        started = time.perf_counter()
        if mode != "full" and kind == "collection_report":
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / name
                write_report(store, run_id, path)
                elapsed = time.perf_counter() - started
                peak = _peak_mb()  # the writer's own (hashing the file below costs nothing)
                out[name] = {"seconds": elapsed, "build_s": elapsed,
                             "sha256": file_sha256(path), "report_mb": path.stat().st_size / 1e6}
            continue
        with gc_paused():  # both ways, as the writers do: only the fold differs
            if mode == "full":
                report = full(store.iter_events(run_id))
            else:
                report = store.project(run_id, kind).report()
            built = time.perf_counter()
            text = report_text(report)
        out[name] = {"seconds": time.perf_counter() - started, "build_s": built - started,
                     "sha256": hashlib.sha256(text.encode()).hexdigest(),
                     "report_mb": len(text) / 1e6}
        if mode == "full":  # what the text cost before runtime/json_text.py (GC paused too)
            started = time.perf_counter()
            with gc_paused():
                json.dumps(report, sort_keys=True, indent=2, allow_nan=False)
            out[name]["stdlib_text_s"] = time.perf_counter() - started
    out["seconds"], out["peak_mb"] = out["report.json"]["seconds"], _peak_mb()
    if mode != "full":
        out["peak_mb"] = peak
    print(json.dumps(out))


def _reports(db: Path, run_id: str) -> dict[str, dict]:
    """Full and incremental builds of the session-end reports, each in a fresh process;
    the two must give the same bytes."""
    got = {mode: _run_child(["--child-report", mode, str(db), run_id])
           for mode in ("full", "incremental")}
    for name in REPORTS:
        if got["full"][name]["sha256"] != got["incremental"][name]["sha256"]:
            raise SystemExit(f"{name}: the incremental build differs from the full one")
    return got


def _print_reports(rows: list[tuple[int, dict[str, dict]]]) -> None:
    """Build = the projection (log or snapshot + tail -> dict); total adds ``report_text``
    (the file's bytes), the same work both ways and as long as the report; ``stdlib text``
    is what ``json.dumps(indent=2)`` took for the same bytes before ``runtime/json_text``.
    The incremental ``report.json`` is the session end's streamed write (build = total,
    file written included), its peak RSS the writer's."""
    print(f"{'events':>9} | {'report':<23} | {'build full':>10} | {'build incr':>10} | "
          f"{'speed-up':>8} | {'total full':>10} | {'total incr':>10} | {'MB':>5} | "
          f"{'peak full/incr MB':>17} | {'text s':>6} | {'stdlib text s':>13}")
    for size, got in rows:
        full, incr = got["full"], got["incremental"]
        for name in REPORTS:
            f, i = full[name], incr[name]
            ratio = f["build_s"] / max(i["build_s"], 1e-9)
            print(f"{size:>9} | {name:<23} | {f['build_s']:10.3f} | {i['build_s']:10.3f} | "
                  f"{ratio:7.1f}x | {f['seconds']:10.3f} | {i['seconds']:10.3f} | "
                  f"{f['report_mb']:5.1f} | {full['peak_mb']:8.0f}/{incr['peak_mb']:<8.0f} | "
                  f"{f['seconds'] - f['build_s']:6.3f} | {f['stdlib_text_s']:13.3f}")


def _child_append(db: str, run_id: str) -> None:
    """Append one episode (6 events) at a time, as the collector does, through two
    snapshot boundaries (every 10,000 events): the first boundary of a fresh writer loads
    each projection from its snapshot + tail, the second is a writer's steady state. Also
    the snapshot bytes each boundary wrote."""
    _quiet()
    from store import EventStore, NewEvent

    store = EventStore(f"sqlite:///{db}", snapshot_every=10_000)
    written: list[int] = []
    original = store._snapshot_records

    def counted(*args: object, **kwargs: object) -> list:
        records = original(*args, **kwargs)  # type: ignore[arg-type]
        written.append(sum(len(r.body) for r in records))
        return records

    store._snapshot_records = counted  # type: ignore[method-assign]
    state = store.state(run_id)
    version = state.version
    batch = max(b for b, _e in state.episodes)
    e = 1 + max(e for b, e in state.episodes if b == batch)
    plain: list[float] = []
    boundaries: list[dict] = []
    while len(boundaries) < 2:
        events = [NewEvent(t, p) for t, p in _episode(batch, e)]
        e += 1
        before = len(written)
        started = time.perf_counter()
        version = store.append(run_id, events, expected_version=version)
        elapsed = time.perf_counter() - started
        if len(written) > before:
            boundaries.append({"seconds": elapsed, "snapshot_mb": written[-1] / 1e6})
        else:
            plain.append(elapsed)
    plain.sort()
    print(json.dumps({
        "seconds": boundaries[1]["seconds"], "code": 0, "peak_mb": _peak_mb(),
        "first": boundaries[0], "steady": boundaries[1],
        "plain_median_s": plain[len(plain) // 2], "plain_max_s": plain[-1],
    }))


def _appends(db: Path, run_id: str) -> dict:
    copy = db.with_name(db.stem + "-append.db")
    _copy_db(db, copy)
    try:
        return _run_child(["--child-append", str(copy), run_id])
    finally:
        copy.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(str(copy) + suffix).unlink(missing_ok=True)


def _print_appends(rows: list[tuple[int, dict]]) -> None:
    print("appends of one episode (6 events) with snapshots every 10,000 events "
          "(the boundary append writes them in its transaction):")
    print(f"{'events':>9} | {'plain median s':>14} | {'plain max s':>11} | "
          f"{'1st boundary s':>14} | {'MB':>6} | {'steady boundary s':>17} | {'MB':>6} | "
          f"{'peak MB':>7}")
    for size, a in rows:
        print(f"{size:>9} | {a['plain_median_s']:14.4f} | {a['plain_max_s']:11.4f} | "
              f"{a['first']['seconds']:14.3f} | {a['first']['snapshot_mb']:6.2f} | "
              f"{a['steady']['seconds']:17.3f} | {a['steady']['snapshot_mb']:6.2f} | "
              f"{a['peak_mb']:7.0f}")


def _run_child(args: list[str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=REPO,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    return result


def _measure(db: Path, run_id: str) -> dict[str, dict]:
    url = f"sqlite:///{db}"
    figures = {
        "runs": _run_child(["--child-cli", "runs", "--db", url]),
        "show": _run_child(["--child-cli", "show", run_id, "--db", url]),
        "forensics": _run_child(["--child-cli", "forensics", run_id, "--db", url]),
        "report": _run_child(["--child-cli", "report", run_id, "--out", str(db.parent /
                              f"{db.stem}-html"), "--no-thumbnails", "--db", url]),
    }
    shutil.rmtree(db.parent / f"{db.stem}-html", ignore_errors=True)
    copy = db.with_name(db.stem + "-resume.db")
    _copy_db(db, copy)
    try:
        figures["resume"] = _run_child(["--child-resume", str(copy), run_id])
    finally:
        copy.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(str(copy) + suffix).unlink(missing_ok=True)
    return figures


def _startup(db: Path, run_id: str) -> None:
    """Wall time of read-only commands on a small store vs ``python -c pass`` in the same
    run (median of 5, interleaved), the CPU time of the same runs (less sensitive to a busy
    box), and which heavy modules each command imported."""
    url = f"sqlite:///{db}"
    head = "0" * 64
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        **{
            f"assetcast {' '.join(argv)}": [sys.executable, "-m", "runtime.cli", *argv,
                                             "--db", url, "--log-level", "warning"]
            for argv in (["runs"], ["show", run_id], ["forensics", run_id],
                         ["verify", run_id, "--head", head])
        },
    }
    walls: dict[str, list[float]] = {label: [] for label in commands}
    cpus: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(5):
        for label, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(argv, cwd=REPO, capture_output=True, check=False)
            walls[label].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[label].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    base = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"start-up on a small DB (median of 5; goal < 0.4 s over python -c pass = "
          f"{base:.3f} s wall, {base_cpu:.3f} s CPU):")
    for label in list(commands)[1:]:
        wall, cpu = statistics.median(walls[label]), statistics.median(cpus[label])
        print(f"  {label[:48]:<48} wall {wall:.3f} s (+{wall - base:.3f})  "
              f"CPU {cpu:.3f} s (+{cpu - base_cpu:.3f})")
    heavy = ("torch", "mujoco", "trimesh", "scipy", "pydantic", "sqlmodel", "sqlalchemy.orm")
    probe = (
        "import contextlib, io, sys; from runtime.cli.entry_point import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()): main(['runs', '--db', {url!r}])\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                           text=True, check=True).stderr.strip().splitlines()[-1]
    print(f"  heavy modules imported by `runs` (of {', '.join(heavy)}): {found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--child-cli", nargs=argparse.REMAINDER)
    parser.add_argument("--child-resume", nargs=2)
    parser.add_argument("--child-report", nargs=3)
    parser.add_argument("--child-append", nargs=2)
    args = parser.parse_args()
    if args.child_cli:
        _child_cli(args.child_cli)
        return
    if args.child_resume:
        _child_resume(*args.child_resume)
        return
    if args.child_report:
        _child_report(*args.child_report)
        return
    if args.child_append:
        _child_append(*args.child_append)
        return
    _quiet()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows, reports, appends = [], [], []
    for size in sizes:
        db, run_id, built = _build(size)
        mb = db.stat().st_size / 1e6
        note = f"built or re-snapshotted in {built:.1f} s" if built else "cached"
        measured = _with_tail(db, run_id)
        print(f"{size:>9} events: {db} ({mb:.0f} MB, {note}); measured with "
              f"{_tail(measured, run_id)}", flush=True)
        try:
            rows.append((size, _measure(measured, run_id)))
            reports.append((size, _reports(measured, run_id)))
            appends.append((size, _appends(measured, run_id)))
        finally:
            measured.unlink(missing_ok=True)
    print()
    print(f"{'events':>9} | {'command':<9} | {'own s':>7} | {'wall s':>7} | {'peak MB':>8}")
    for size, figures in rows:
        for name, f in figures.items():
            print(f"{size:>9} | {name:<9} | {f['seconds']:7.3f} | {f['wall']:7.3f} | "
                  f"{f['peak_mb']:8.0f}")
    biggest = rows[-1][1]
    goals = {"runs": 0.3, "show": 1.0, "forensics": 1.0, "resume": 2.0}
    verdicts = [
        f"{name} {biggest[name]['seconds']:.3f} s "
        f"({'ok' if biggest[name]['seconds'] < goal else 'MISSED'} < {goal} s)"
        for name, goal in goals.items()
    ]
    peak = max(biggest[name]["peak_mb"] for name in goals)
    verdicts.append(f"peak {peak:.0f} MB ({'ok' if peak < 300 else 'MISSED'} < 300 MB)")
    print(f"at {rows[-1][0]} events: " + "; ".join(verdicts))
    print()
    print("session-end reports (what collect/resume/prepare write), full log vs snapshot + tail:")
    _print_reports(reports)
    print()
    _print_appends(appends)
    print()
    small_db, small_run, _ = _build(sizes[0])
    _startup(small_db, small_run)


if __name__ == "__main__":
    main()
