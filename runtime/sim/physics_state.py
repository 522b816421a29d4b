"""MuJoCo's own simulation state, recorded every control interval, so an episode can be
replayed exactly: set a recorded state, apply the recorded action, step, and get the next
recorded state bit for bit.

The signature is ``mjSTATE_FULLPHYSICS`` (time, qpos, qvel, act, history, plugin and plastic
state) plus the solver's warm start (without it the constraint solver starts elsewhere and the
replay drifts in the last bits) and the controls. The other integration inputs (applied
forces, mocap poses, equality flags, user data) are never written by assetcast, so they keep
their model defaults: restore into freshly reset ``MjData`` (``mj_resetData``). Every element
is named ``<element>[i]`` in the column names, so a reader can rebuild the signature from the
file alone (:func:`signature_of`).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

KEY = "physics_state"
SIGNATURE = int(
    mujoco.mjtState.mjSTATE_FULLPHYSICS
    | mujoco.mjtState.mjSTATE_WARMSTART
    | mujoco.mjtState.mjSTATE_CTRL
)
# MuJoCo's state elements in the order mj_getState writes them (ascending bit).
_ELEMENTS = tuple(
    (name.removeprefix("mjSTATE_").lower(), int(getattr(mujoco.mjtState, name)))
    for name in (
        "mjSTATE_TIME", "mjSTATE_QPOS", "mjSTATE_QVEL", "mjSTATE_ACT", "mjSTATE_HISTORY",
        "mjSTATE_WARMSTART", "mjSTATE_CTRL", "mjSTATE_QFRC_APPLIED", "mjSTATE_XFRC_APPLIED",
        "mjSTATE_EQ_ACTIVE", "mjSTATE_MOCAP_POS", "mjSTATE_MOCAP_QUAT", "mjSTATE_USERDATA",
        "mjSTATE_PLUGIN", "mjSTATE_PLASTIC",
    )
)
_BITS = dict(_ELEMENTS)


def capture(model: mujoco.MjModel, data: mujoco.MjData, signature: int = SIGNATURE) -> np.ndarray:
    """The state ``signature`` selects, as a new float64 vector."""
    state = np.empty(mujoco.mj_stateSize(model, signature), dtype=np.float64)
    mujoco.mj_getState(model, data, state, signature)
    return state


def restore(
    model: mujoco.MjModel, data: mujoco.MjData, state: np.ndarray, signature: int = SIGNATURE
) -> None:
    """Put ``state`` (captured with ``signature``) back into ``data``."""
    mujoco.mj_setState(model, data, np.ascontiguousarray(state, dtype=np.float64), signature)


def names(model: mujoco.MjModel, signature: int = SIGNATURE) -> tuple[str, ...]:
    """``<element>[i]`` for every number of the state (``time`` for the time)."""
    out: list[str] = []
    for element, bit in _ELEMENTS:
        if signature & bit:
            size = mujoco.mj_stateSize(model, bit)
            out += [element] if element == "time" else [f"{element}[{i}]" for i in range(size)]
    return tuple(out)


def units(state_names: Sequence[str]) -> tuple[str, ...]:
    """Seconds for the time; MuJoCo's native units (m, rad, ...) for everything else."""
    return tuple("s" if n == "time" else "native" for n in state_names)


def signature_of(state_names: Sequence[str]) -> int:
    """The signature a state with these column names was captured with."""
    signature = 0
    for name in state_names:
        signature |= _BITS[name.split("[", 1)[0]]
    return signature
