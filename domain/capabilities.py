"""The documented capability vocabulary: what a role's query can ask an asset to afford.

Capabilities are free strings in a descriptor (a plugin may define its own), so an unknown
name is not an error; but a typo (``containr``) or an old name (``support``) silently makes
an asset invisible to every query, so ``catalog check`` warns about names outside this list.
"""

from __future__ import annotations

import difflib

CAPABILITIES: dict[str, str] = {
    "antipodal_grasp": "a parallel gripper can hold it between two opposing faces",
    "container": "open top with a usable interior (container_region) that holds objects",
    "support_surface": "a flat top (support_region) that objects can stand on",
    "pour_source": "can pour its contents out (provenance.pouring.mouth_radius_m)",
    "pour_target": "can be poured into (provenance.pouring.opening_radius_m)",
    "stackable": "another asset of its kind can stand on it",
}


def unknown_capability_warning(name: str) -> str | None:
    """A one-line warning for a name outside the vocabulary (with the closest known name)."""
    if name in CAPABILITIES:
        return None
    close = difflib.get_close_matches(name, list(CAPABILITIES), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"capability {name!r} is not in the documented vocabulary "
        f"({', '.join(CAPABILITIES)}){hint}"
    )
