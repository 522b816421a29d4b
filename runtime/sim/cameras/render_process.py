"""Entry point of the render process: ``python -m runtime.sim.cameras.render_process FD``.

A module of its own so that running it does not re-execute ``render_server`` (which the
package imports) as ``__main__``.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from runtime.sim.cameras.render_server import serve


def main() -> int:
    serve(Connection(int(sys.argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
