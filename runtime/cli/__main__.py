"""``python -m runtime.cli`` works as it did when the CLI was a single module."""

import sys

from runtime.cli.entry_point import main

sys.exit(main())
