"""The Ray suite (``ray_inner/``) only ever runs inside its own loopback-only namespace,
started by ``test_ray_in_namespace.py``; collected anywhere else it would start Ray on the
host's network, so it is not collected there."""

from __future__ import annotations

import os

from tests.loopback_netns import MARKER_ENV

collect_ignore = [] if os.environ.get(MARKER_ENV) == "1" else ["ray_inner"]
