"""Entry point of the render process: ``python .../render_process.py FD`` (run by path).

The render process needs only the camera modules (rendering, backend, labels, encoding) and
``domain``. Importing them the usual way would first run ``runtime.sim``'s and
``runtime.sim.cameras``'s ``__init__``, which import the whole simulator (trimesh, torch):
seconds of start-up and hundreds of MiB per render process for nothing. So this file is run
by path, registers those two packages as bare packages (their folders, their ``__init__``
not executed), then imports the server from them as usual.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

PACKAGES = ("runtime.sim", "runtime.sim.cameras")


def _bare_packages(root: Path) -> None:
    for name in PACKAGES:
        if name in sys.modules:
            continue
        folder = root.joinpath(*name.split("."))
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        module = types.ModuleType(name)
        module.__spec__ = spec
        module.__path__ = [str(folder)]
        module.__package__ = name
        sys.modules[name] = module


def main() -> int:
    root = Path(__file__).resolve().parents[3]
    sys.path[0] = str(root)  # run by path: the script's folder is not a package root
    _bare_packages(root)
    from multiprocessing.connection import Connection

    from runtime.sim.cameras.render_server import serve

    serve(Connection(int(sys.argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
