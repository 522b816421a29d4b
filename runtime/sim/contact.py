"""Contact model shared by the scene and every robot kind.

Tuned so a two-finger grasp holds: torsional friction (condim 4), elliptic cones with a
high impedance ratio (set on the scene options), and grippy finger pads.
"""

from __future__ import annotations

CONDIM = 4
OBJECT_FRICTION = (1.0, 0.01, 0.0001)
FINGER_FRICTION = (1.5, 0.02, 0.0001)
TABLE_FRICTION = (0.8, 0.01, 0.0001)
CONTACT_SOLREF = (0.01, 1.0)
IMPRATIO = 10.0
