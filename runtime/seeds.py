"""Seeds of collection: one pure function so a resumed episode replays the same physics.

Batch ``i`` runs with ``batch_seed = cfg.seed + i`` (the matcher's seed too). Episode ``j`` of
that batch resets the simulator with :func:`episode_seed`, which depends on nothing but
``(batch_seed, j)``: not on the session, the order episodes ran in, the number of episodes
before it, or any random state carried by the environment. That is what lets an episode
interrupted by a crash be re-run from its start in a fresh process and produce the same bytes.

The derivation is ``uint32(big-endian first 4 bytes of SHA-256("assetcast.episode:" +
"<batch_seed>:<episode_index>"))``. SHA-256 (rather than ``batch_seed * K + j``) keeps
neighbouring batches from producing overlapping episode seed ranges.
"""

from __future__ import annotations

import hashlib

EPISODE_SEED_DOMAIN = "assetcast.episode"
UINT32_LIMIT = 2**32


def batch_seed(base_seed: int, batch_index: int) -> int:
    """Seed of batch ``batch_index`` for a run whose configured seed is ``base_seed``."""
    return base_seed + batch_index


def episode_seed(batch_seed_value: int, episode_index: int) -> int:
    """The simulator seed of episode ``episode_index`` of the batch seeded ``batch_seed_value``."""
    if type(batch_seed_value) is not int or type(episode_index) is not int:
        raise TypeError("batch seed and episode index must be ints")
    if batch_seed_value < 0 or episode_index < 0:
        raise ValueError("batch seed and episode index must be >= 0")
    material = f"{EPISODE_SEED_DOMAIN}:{batch_seed_value}:{episode_index}".encode("ascii")
    return int.from_bytes(hashlib.sha256(material).digest()[:4], "big")
