"""Benchmark: what one package costs to prepare at the mesh limits, and what a hostile one
costs to refuse.

Each measurement runs in a fresh subprocess (peak RSS is per process) and prints wall time
and peak resident memory of ``prepare_package`` on a binary-STL sphere of the given face
count: at half the default face limit, at the limit itself, and a header claiming 10x the
limit (refused from the header, before loading). The import baseline (an empty package-free
process) is printed too, so the cost of the mesh itself can be read off.

    .venv/bin/python bench/bench_mesh_limits.py [--faces N ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from domain.limits import DEFAULT_MAX_MESH_FACES  # noqa: E402

_CHILD = r"""
import json, logging, resource, struct, sys, tempfile, time
from pathlib import Path
import numpy as np
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from domain.assets import PreparationContext
from domain.errors import AssetValidationError
from runtime.assets.cache import prepare_package

faces, claimed = int(sys.argv[1]), int(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
folder = Path(tempfile.mkdtemp(prefix="bench-mesh-"))
if faces:
    # A UV sphere (radius 5 cm) with about ``faces`` triangles, written as binary STL.
    rings = max(int((faces / 2) ** 0.5), 3)
    theta = np.linspace(0, np.pi, rings + 1)
    phi = np.linspace(0, 2 * np.pi, rings + 1)[:-1]
    grid = np.stack(np.meshgrid(theta, phi, indexing="ij"), -1).reshape(-1, 2)
    pts = 0.05 * np.c_[np.sin(grid[:, 0]) * np.cos(grid[:, 1]),
                       np.sin(grid[:, 0]) * np.sin(grid[:, 1]), np.cos(grid[:, 0])]
    pts[:, 2] += 0.05
    idx = np.arange((rings + 1) * rings).reshape(rings + 1, rings)
    a, b = idx[:-1], np.roll(idx[:-1], -1, axis=1)
    c, d = idx[1:], np.roll(idx[1:], -1, axis=1)
    tris = np.concatenate([np.stack([a, c, b], -1).reshape(-1, 3),
                           np.stack([b, c, d], -1).reshape(-1, 3)])
    record = np.zeros(len(tris), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    record["v"] = pts[tris]
    body = record.tobytes()
    count = len(tris)
else:
    body, count = b"", 0
(folder / "mesh.stl").write_bytes(b"\0" * 80 + struct.pack("<I", claimed or count) + body)
lo = [-0.05, -0.05, 0.0]; hi = [0.05, 0.05, 0.1]
(folder / "asset.catalog.json").write_text(json.dumps({"descriptor": {"asset_id": "bench",
    "category": "block", "bounds_m": None}, "visual_path": "mesh.stl"}))
start = time.perf_counter()
outcome = "prepared"
try:
    prepare_package(folder, candidate_id="b", locator=str(folder),
                    context=PreparationContext(str(folder / "cache")))
except AssetValidationError as error:
    outcome = str(error).split(":")[0]
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"faces": count, "claimed": claimed or count, "seconds": elapsed,
                  "peak_mb": peak / 1024, "baseline_mb": base / 1024, "outcome": outcome}))
"""


def _measure(faces: int, claimed: int = 0) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(faces), str(claimed)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    limit = DEFAULT_MAX_MESH_FACES
    parser.add_argument("--faces", type=int, nargs="*", default=[limit // 2, limit - 2000])
    args = parser.parse_args()
    print(f"default max_mesh_faces = {limit}")
    rows = [_measure(f) for f in args.faces]
    rows.append(_measure(100, claimed=10 * limit))
    for row in rows:
        print(
            f"faces {row['faces']:>8} (header {row['claimed']:>8}): {row['outcome']:<15} "
            f"{row['seconds']:6.2f} s  peak RSS {row['peak_mb']:7.1f} MB "
            f"(imports alone {row['baseline_mb']:.1f} MB)"
        )


if __name__ == "__main__":
    main()
