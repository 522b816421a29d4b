"""Benchmark: ``catalog import`` of an open-top mug at growing face counts.

Prints, per size, the time to import with bbox centring only (load, weld, orient, write)
and with ``--centre footprint --container --pouring`` (adds the ray casts), side by side,
so the cost of the region estimates is a ratio measured in one run.

    .venv/bin/python bench/bench_import.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import trimesh

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.assets.importing import ImportOptions, import_asset  # noqa: E402


def _mug(sections: int) -> trimesh.Trimesh:
    wall = trimesh.creation.annulus(r_min=0.035, r_max=0.04, height=0.1, sections=sections)
    wall.apply_translation([0, 0, 0.05])
    floor = trimesh.creation.cylinder(radius=0.035, height=0.005, sections=sections)
    floor.apply_translation([0, 0, 0.0025])
    handle = trimesh.creation.box((0.03, 0.01, 0.06))
    handle.apply_translation([0.055, 0, 0.05])
    return trimesh.util.concatenate([wall, floor, handle])


def _time(source: Path, catalog: Path, options: ImportOptions) -> float:
    start = time.perf_counter()
    import_asset(source, catalog, options)
    return time.perf_counter() - start


def main() -> None:
    print(f"{'faces':>8} {'plain s':>9} {'regions s':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for sections in (48, 512, 4096):
            mesh = _mug(sections)
            source = root / f"mug{sections}.obj"
            mesh.export(source)
            plain = _time(source, root / f"a{sections}", ImportOptions("mug", "mug"))
            full = _time(
                source, root / f"b{sections}",
                ImportOptions("mug", "mug", centring="footprint", container=True, pouring=True),
            )
            print(f"{len(mesh.faces):>8} {plain:>9.3f} {full:>10.3f} {full / plain:>6.1f}")


if __name__ == "__main__":
    main()
