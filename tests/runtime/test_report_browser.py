"""The run report, opened in a real browser (headless Chromium): the numbers on the page are
the log's, nothing is fetched from the network, and the screenshot is kept as an artifact
(``test-artifacts/report.png``)."""

from __future__ import annotations

import base64
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.demo import demo_task_text
from runtime.report import write_report
from runtime.report.html import render_page
from runtime.report.plots import PLOTS
from runtime.sim.cameras.contact_sheet import contact_sheet, png_bytes
from runtime.sim.cameras.reader import read_episode_frames
from runtime.sim.cameras.report_frames import MAX_EPISODES, episode_sheets, sample
from store.event_store import EventStore
from store.projections.collection_report import collection_report
from store.projections.run_report import run_report
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)
from tests.runtime.chromium import find_chromium, page_requests, run_chromium

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real 3-batch run (the demo's seed: some batches reject in physics) and its report."""
    base = tmp_path_factory.mktemp("report")
    assert main(["catalog", "demo", str(base / "catalog"), "--log-level", "error"]) == 0
    task = base / "task.yaml"
    task.write_text(demo_task_text(), encoding="utf-8")
    url = f"sqlite:///{base / 'assetcast.db'}"
    code = main([
        "run", str(task), "--catalog", f"item={base / 'catalog'}", "--catalog",
        f"bin={base / 'catalog'}", "--out", str(base / "out"), "--seed", "26", "--batches", "3",
        "--episodes-per-batch", "1", "--settle-steps", "50", "--db", url, "--no-progress",
        "--log-level", "error",
    ])
    assert code == 0
    store = EventStore(url)
    [run] = store.list_runs()
    result = write_report(store, run.run_id, base / "report")
    return {"store": store, "run_id": run.run_id, "result": result, "base": base, "url": url}


class _Cells(HTMLParser):
    """Text of elements by id, and of every element carrying ``data-field``."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[dict[str, str]] = []
        self.by_id: dict[str, str] = {}
        self.fields: list[tuple[dict[str, str], str]] = []
        self.images: list[dict[str, str]] = []
        self.meta: list[dict[str, str]] = []
        self.unavailable: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append(a)
            return
        if tag == "meta":
            self.meta.append(a)
            return
        a["_tag"], a["_text"] = tag, ""
        self.stack.append(a)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or tag in ("img", "meta"):
            return
        a = self.stack.pop()
        if "id" in a:
            self.by_id[a["id"]] = a["_text"]
        if "data-field" in a:
            self.fields.append((a, a["_text"]))
        if a.get("class") == "unavailable":
            self.unavailable.append(a["_text"])

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element["_text"] += data


def _log_numbers(store: EventStore, run_id: str) -> dict:
    """What the log says, computed here without the report's projection."""
    events = store.read(run_id)
    collected = collection_report(events)
    per_batch = {b["batch_index"]: (b["accepted"], b["attempted"]) for b in collected["batches"]}
    per_asset: dict[tuple[str, str], list[int]] = {}
    for e in events:
        if e.type == "BatchResolved":
            accepted, attempted = per_batch.get(e.payload["batch_index"], (0, 0))
            for role, asset in e.payload["assets"].items():
                slot = per_asset.setdefault((role, asset["content_sha256"]), [0, 0])
                slot[0] += accepted
                slot[1] += attempted
    stage_of = {"initial_checks_failed": "initial_checks", "program_incomplete": "program",
                "final_checks_failed": "final_checks"}
    rejected_stages = {
        stage_of[ep["validation"]["reason"]]
        for b in collected["batches"] for ep in b["episodes"] if not ep["accepted"]
    }
    if any(e.type in ("CandidateRejected", "CandidateListingFailed", "BatchUnresolvable")
           for e in events):
        rejected_stages.add("preparation")
    durations: dict[tuple[int, int], float] = {}
    for e in events:
        p = e.payload
        if e.type == "EpisodeStarted":
            durations[(p["batch_index"], p["episode_index"])] = p["reset_s"]
        elif "duration_s" in p:
            durations[(p["batch_index"], p["episode_index"])] += p["duration_s"]
    return {
        "accepted": collected["accepted"], "attempted": collected["attempted"],
        "per_batch": per_batch, "per_asset": per_asset, "durations": durations,
        "rejected_stages": rejected_stages,
        "events": len(events),
    }


def test_report_in_headless_chromium_shows_the_logs_numbers_and_fetches_nothing(
    reported: dict, tmp_path: Path
) -> None:
    chromium = find_chromium()
    store, run_id, result = reported["store"], reported["run_id"], reported["result"]
    html_path: Path = result.html_path
    raw = html_path.read_text(encoding="utf-8")
    # Nothing on the page points at the network.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", raw, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", raw, re.I)

    net_log = tmp_path / "net.json"
    dom = run_chromium(
        chromium, tmp_path / "profile-dom", f"--log-net-log={net_log}", "--dump-dom",
        html_path.as_uri(),
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert page_requests(net_log) == []
    shot = tmp_path / "report.png"
    screenshot = run_chromium(
        chromium, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1100,2400",
        html_path.as_uri(),
    )
    assert screenshot.returncode == 0, screenshot.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report.png")

    cells = _Cells()
    cells.feed(dom.stdout)
    assert any(
        m.get("http-equiv") == "Content-Security-Policy"
        and m.get("content", "").startswith("default-src 'none'") for m in cells.meta
    )
    assert cells.images and all(
        i["src"].startswith("data:image/png;base64,") for i in cells.images
    )
    log = _log_numbers(store, run_id)
    assert log["attempted"] == 3 and 0 < log["accepted"] < 3  # both outcomes on the page
    assert int(cells.by_id["accepted"]) == log["accepted"]
    assert int(cells.by_id["attempted"]) == log["attempted"]
    assert int(cells.by_id["events"]) == log["events"]
    assert cells.by_id["head-hash"] == store.head_hash(run_id)
    assert cells.by_id["chain-status"] == "hash chain ok"
    batches: dict[int, dict[str, int]] = {}
    assets: dict[tuple[str, str], dict[str, int]] = {}
    durations: dict[tuple[int, int], float] = {}
    for attrs, text in cells.fields:
        field = attrs["data-field"]
        if "data-batch" in attrs and field in ("accepted", "attempted"):
            batches.setdefault(int(attrs["data-batch"]), {})[field] = int(text)
        elif "data-asset" in attrs:
            assets.setdefault((attrs["data-role"], attrs["data-asset"]), {})[field] = int(text)
        elif field == "duration":
            durations[(int(attrs["data-batch"]), int(attrs["data-episode"]))] = float(text)
    assert {b: (v["accepted"], v["attempted"]) for b, v in batches.items()} == log["per_batch"]
    assert {k: [v["accepted"], v["attempted"]] for k, v in assets.items()} == log["per_asset"]
    assert durations.keys() == log["durations"].keys()
    for key, seconds in durations.items():
        assert seconds == pytest.approx(log["durations"][key], abs=0.0011)
    # One rendered thumbnail per role and asset set (MuJoCo offscreen, EGL).
    thumbs = [i for i in cells.images if i.get("class") == "thumb"]
    assert len(thumbs) == 2 * 3, cells.unavailable
    assert result.thumbnails_rendered == len(log["per_asset"])
    # Episode frames: one contact sheet per committed episode, read back from its videos.
    committed = _committed_with_cameras(store, run_id)
    frames = [i for i in cells.images if i.get("class") == "frame"]
    assert len(frames) == len(committed) == log["accepted"], cells.unavailable
    assert int(cells.by_id["frames-shown"]) == int(cells.by_id["frames-committed"]) == len(
        committed)
    out_dir = Path(next(e.payload["output_dir"] for e in store.read(run_id)
                        if e.type == "RunCreated"))
    for image, (key, receipt) in zip(frames, sorted(committed.items()), strict=True):
        assert image["alt"] == f"batch {key[0]} episode {key[1]}"
        shown = base64.b64decode(image["src"].removeprefix("data:image/png;base64,"))
        expected = read_episode_frames(out_dir, receipt, modalities=("rgb",))
        assert shown == png_bytes(contact_sheet(expected, columns=4))
    stages = {a["data-stage"] for a, _ in cells.fields if a["data-field"] == "rejections"}
    assert stages == log["rejected_stages"] != set()
    assert {p.name for p in result.png_paths} == {
        "accepted_per_batch.png", "accepted_per_asset.png", "rejections_by_stage.png",
        "episode_durations.png", "sessions_timeline.png",
    }


def _committed_with_cameras(store: EventStore, run_id: str) -> dict[tuple[int, int], dict]:
    return {
        (e.payload["batch_index"], e.payload["episode_index"]): e.payload
        for e in store.read(run_id) if e.type == "TrajectoryCommitted" and e.payload["files"]
    }


def test_an_altered_video_shows_its_reason_instead_of_frames(
    reported: dict, tmp_path: Path
) -> None:
    """The sheets come from the verified files: a flipped byte in a committed video is named
    on the page, and the other episodes still show their frames."""
    store, run_id = reported["store"], reported["run_id"]
    committed = _committed_with_cameras(store, run_id)
    events = list(store.read(run_id))
    out_dir = Path(next(e.payload["output_dir"] for e in events if e.type == "RunCreated"))
    copy = tmp_path / "out"
    shutil.copytree(out_dir / "recordings", copy / "recordings")
    key, receipt = sorted(committed.items())[0]
    video = next(f for f in receipt["files"] if f["modality"] == "rgb")
    target = copy / video["path"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    sheets = episode_sheets(events, copy)
    assert sheets[key] == f"camera file {target}: differs from its commit receipt"
    assert all(isinstance(sheets[k], bytes) for k in committed if k != key)
    page = render_page(run_report(events), store.verify_chain(run_id), {
        name: b"\x89PNG" for name in PLOTS
    }, {}, sheets)
    assert f'<p class="unavailable">camera file {target}: differs from its commit receipt' in page


def test_the_frame_sample_is_bounded_and_spread() -> None:
    keys = [(b, e) for b in range(10) for e in range(5)]
    picked = sample(keys)
    assert len(picked) == MAX_EPISODES and picked[0] == (0, 0) and picked[-1] == (9, 4)
    assert picked == sorted(set(picked))
    assert sample(keys[:3]) == keys[:3]


def test_the_net_log_check_does_see_a_page_request(tmp_path: Path) -> None:
    """Control: a page that does fetch is caught, so the empty list above means something."""
    chromium = find_chromium()
    page = tmp_path / "fetching.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    net_log = tmp_path / "net.json"
    done = run_chromium(
        chromium, tmp_path / "profile", f"--log-net-log={net_log}", "--dump-dom", page.as_uri()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert page_requests(net_log) == ["http://127.0.0.1:9/x.png"]


def test_report_command_says_when_rendering_is_skipped(
    reported: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    code = main(["report", reported["run_id"], "--out", str(out), "--no-thumbnails",
                 "--db", reported["url"], "--log-level", "error"])
    assert code == 0
    assert capsys.readouterr().out == f"report: {out / 'report.html'}\n"
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("rendering skipped (--no-thumbnails)") == 2 * 3
    assert sorted(p.name for p in out.glob("*.png")) == [
        "accepted_per_asset.png", "accepted_per_batch.png", "episode_durations.png",
        "rejections_by_stage.png", "sessions_timeline.png",
    ]
