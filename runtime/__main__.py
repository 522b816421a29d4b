"""``python -m runtime`` runs the ``assetcast`` command line (handy before installation)."""

import sys

from runtime.cli import main

sys.exit(main())
