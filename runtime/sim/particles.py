"""The particles a pour source holds, so that pouring has an outcome that can be measured.

Without contents, "pour" could only be judged by whether anything tipped over. A source
entity that a ``pour`` step names, and whose descriptor has a ``container_region`` (its
interior cavity), is filled with small free spheres. Their size and number follow from the
asset alone, so the same deployment always holds the same particles:

- radius: a quarter of the mouth radius (``provenance.pouring.mouth_radius_m``, else half the
  cavity's narrower side), kept within [``MIN_RADIUS_M``, ``MAX_RADIUS_M``] so a particle
  always passes the mouth and the physics stays stable at the task's time step;
- count: a cubic lattice (diameter plus ``GAP_M``) over the lower ``FILL_FRACTION`` of the
  cavity, at most ``MAX_PARTICLES`` (each particle costs physics time on every step).

A source without a cavity holds nothing; ``poured_fraction`` then reports itself
unavailable, which rejects the episode (acceptance fails closed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from domain.task import TaskSpec
from runtime.sim.geometry import EntityGeometry

MIN_RADIUS_M = 0.0025
MAX_RADIUS_M = 0.004
MAX_PARTICLES = 12
GAP_M = 0.0005
FILL_FRACTION = 0.6
DENSITY_KG_M3 = 1000.0
# Grains slide on each other and on walls more easily than objects do; the particles'
# geoms win the contact-parameter mix (higher priority), so this is the friction they see.
FRICTION = (0.3, 0.005, 0.0001)
# Stiff contacts (time constant two physics steps at the default 2 ms): a grain falling
# onto a 3 mm container floor must be stopped before it is through it.
SOLREF = (0.004, 1.0)


@dataclass(frozen=True)
class ParticleSet:
    """The particles of one source entity: radius and centres in the source's frame."""

    entity_id: str
    radius_m: float
    local_centres: np.ndarray  # (n, 3), package frame of the source

    @property
    def count(self) -> int:
        return int(len(self.local_centres))

    @property
    def mass_kg(self) -> float:
        return DENSITY_KG_M3 * 4.0 / 3.0 * math.pi * self.radius_m**3


def pour_sources(task: TaskSpec) -> tuple[str, ...]:
    """Entities some ``pour`` step pours from, in task order."""
    named = {step.object for step in task.program if step.skill == "pour"}
    return tuple(e.entity_id for e in task.scene.entities if e.entity_id in named)


def _mouth_radius(geometry: EntityGeometry) -> float | None:
    provenance = (geometry.descriptor or {}).get("provenance") or {}
    pouring = provenance.get("pouring") if isinstance(provenance, Mapping) else None
    value = pouring.get("mouth_radius_m") if isinstance(pouring, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def particle_set(geometry: EntityGeometry) -> ParticleSet | None:
    """The particles ``geometry`` holds as a pour source, or None without a usable cavity."""
    region = geometry.region("container_region")
    if region is None:
        return None
    lower, upper = region
    extents = upper - lower
    narrow = float(min(extents[0], extents[1]))
    basis = _mouth_radius(geometry) or narrow / 2
    radius = min(max(basis / 4, MIN_RADIUS_M), MAX_RADIUS_M)
    spacing = 2 * radius + GAP_M
    counts = [int((float(extents[i]) - GAP_M) // spacing) for i in (0, 1)]
    layers = int((float(extents[2]) * FILL_FRACTION - GAP_M) // spacing)
    if min(counts) < 1 or layers < 1:
        return None
    offsets = [
        float(lower[i]) + (float(extents[i]) - counts[i] * spacing) / 2 + spacing / 2
        for i in (0, 1)
    ]
    centres = [
        (offsets[0] + i * spacing, offsets[1] + j * spacing,
         float(lower[2]) + GAP_M + radius + k * spacing)
        for k in range(layers)
        for j in range(counts[1])
        for i in range(counts[0])
    ][:MAX_PARTICLES]
    return ParticleSet(geometry.entity_id, radius, np.asarray(centres, dtype=np.float64))


def particle_sets(
    task: TaskSpec, geometries: Mapping[str, EntityGeometry]
) -> dict[str, ParticleSet]:
    """Every pour source's particles (sources without a cavity are left out)."""
    sets = {}
    for entity_id in pour_sources(task):
        found = particle_set(geometries[entity_id])
        if found is not None:
            sets[entity_id] = found
    return sets
