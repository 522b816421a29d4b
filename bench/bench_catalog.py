"""Benchmark: listing a large catalog the way preparation does.

Prints, for catalogs of growing size, the time to list one folder in path order (no seed),
as a seeded sample (what preparation does: relevance, then the seed's permutation), and the
same folder merged with a full copy of itself (every package's identity then collides and is
hashed, the worst case of ``--catalog ROLE=A --catalog ROLE=B``), side by side in one run.

    .venv/bin/python bench/bench_catalog.py
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import structlog
import trimesh

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.assets import AssetQuery  # noqa: E402
from runtime.assets.mesh_writers import obj_bytes  # noqa: E402
from runtime.assets.providers import DirectoryAssetProvider, MergedAssetProvider  # noqa: E402

QUERY = AssetQuery(category="block", capabilities=("antipodal_grasp",))
LIMIT = 32


def _catalog(root: Path, count: int) -> Path:
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=0.02)  # 1280 faces each
    sphere.apply_translation([0, 0, 0.02])
    mesh = obj_bytes(sphere.vertices, sphere.faces)
    lower, upper = sphere.bounds.tolist()
    for index in range(count):
        folder = root / f"block-{index:04d}"
        folder.mkdir(parents=True)
        (folder / "mesh.obj").write_bytes(mesh)
        descriptor = {
            "asset_id": f"block-{index:04d}", "category": "block",
            "capabilities": ["antipodal_grasp"], "bounds_m": {"lower": lower, "upper": upper},
        }
        (folder / "asset.catalog.json").write_text(
            json.dumps({"descriptor": descriptor, "visual_path": "mesh.obj"})
        )
    return root


def _seconds(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"{'packages':>9} {'path order s':>13} {'seeded s':>9} {'merged+copy s':>14} "
          f"{'merged/seeded':>14}")
    for count in (100, 400, 1600):
        with tempfile.TemporaryDirectory() as scratch:
            first = _catalog(Path(scratch) / "a" / "blocks", count)
            second = Path(scratch) / "b" / "blocks"
            shutil.copytree(first, second)
            single = DirectoryAssetProvider(first)
            merged = MergedAssetProvider([first, second])
            plain = _seconds(partial(single.candidates, QUERY, LIMIT))
            seeded = _seconds(partial(single.candidates, QUERY, LIMIT, seed=7))
            both = _seconds(partial(merged.candidates, QUERY, LIMIT, seed=7))
            assert len(merged.duplicates) == count
            print(f"{count:>9} {plain:>13.3f} {seeded:>9.3f} {both:>14.3f} "
                  f"{both / seeded:>14.1f}")


if __name__ == "__main__":
    main()
