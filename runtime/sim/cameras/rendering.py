"""Offscreen rendering of a task's cameras with ``mujoco.Renderer``.

The cameras are not part of the compiled model: each one is a free camera whose OpenGL pose
is set from the task (fixed) or from the mount body's pose in ``MjData`` (mounted), so the
physics model is the same with or without cameras and a wrist camera follows whichever body
it names. Quality settings are the fast ones measured on these CPU-only machines: no
shadows, no reflections, no multisampling (about 30x faster than MuJoCo's defaults), with a
key light added to the scene so objects are clearly visible from every side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from domain.cameras import CameraSpec
from runtime.sim.cameras.backend import ensure_backend
from runtime.sim.cameras.labels import SegmentationLabels

HIDDEN_GEOM_GROUP = 3  # collision pieces whose entity has a visual mesh
DEPTH_MAX_MM = 65535
_CULL_MARGIN = 1.05  # bounding spheres grown 5%: a culled geom is surely out of view
_OBJ_GEOM = int(mujoco.mjtObj.mjOBJ_GEOM)
_GEOM_NONE = int(mujoco.mjtGeom.mjGEOM_NONE)
_KEY_LIGHT_DIR = np.array([0.3, 0.5, -1.0]) / np.linalg.norm([0.3, 0.5, -1.0])
_FILL_LIGHT_DIR = np.array([-0.4, -0.6, -0.6]) / np.linalg.norm([-0.4, -0.6, -0.6])


@dataclass(frozen=True)
class CameraFrame:
    """One camera at one instant: the images of its modalities and its world pose."""

    images: dict[str, np.ndarray]  # rgb (H,W,3) uint8; depth (H,W) uint16 mm; segmentation
    position_m: np.ndarray  # (3,)
    quat_wxyz: np.ndarray  # (4,) camera frame in the world (MuJoCo convention)


def _quat_matrix(quat: Sequence[float]) -> np.ndarray:
    out = np.empty(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def _matrix_quat(matrix: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_mat2Quat(out, np.ascontiguousarray(matrix, dtype=np.float64).reshape(-1))
    return out


def camera_pose(
    camera: CameraSpec, data: mujoco.MjData, mount_body: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """World position and rotation matrix (columns: camera x, y, z) of ``camera``;
    ``mount_body`` is the body id of a mounted camera (None when fixed)."""
    position = np.asarray(camera.pose.position_m, dtype=np.float64)
    rotation = _quat_matrix(camera.pose.orientation())
    if camera.mount is None or mount_body is None:
        return position.copy(), rotation
    body_rotation = data.xmat[mount_body].reshape(3, 3)
    return data.xpos[mount_body] + body_rotation @ position, body_rotation @ rotation


def prepare_model(model: mujoco.MjModel, cameras: Sequence[CameraSpec]) -> None:
    """Visual settings on the compiled model (render-only fields; physics never reads them)."""
    model.vis.quality.offsamples = 0
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, *(c.width for c in cameras))
    model.vis.global_.offheight = max(model.vis.global_.offheight, *(c.height for c in cameras))
    model.vis.headlight.ambient[:] = (0.25, 0.25, 0.25)
    model.vis.headlight.diffuse[:] = (0.35, 0.35, 0.35)
    model.vis.headlight.specular[:] = (0.05, 0.05, 0.05)
    # An entity drawn by its visual mesh hides its convex collision pieces.
    with_visual = {
        int(model.geom_bodyid[g])
        for g in range(model.ngeom)
        if "_visual_" in (model.geom(g).name or "")
    }
    for g in range(model.ngeom):
        name = model.geom(g).name or ""
        if int(model.geom_bodyid[g]) in with_visual and "_visual_" not in name:
            model.geom_group[g] = HIDDEN_GEOM_GROUP


def _add_light(scene: mujoco.MjvScene, direction: np.ndarray, diffuse: float) -> None:
    if scene.nlight >= len(scene.lights):
        return
    light = scene.lights[scene.nlight]
    light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    light.dir[:] = direction
    light.pos[:] = -direction * 3.0
    light.ambient[:] = (0.1, 0.1, 0.1)
    light.diffuse[:] = (diffuse, diffuse, diffuse)
    light.specular[:] = (0.1, 0.1, 0.1)
    light.headlight = 0
    light.castshadow = 0
    scene.nlight += 1


class _Renderer(mujoco.Renderer):
    """``mujoco.Renderer`` plus one pass that reads colour and depth together.

    Colour and depth come from the same rasterization, so reading both after one
    ``mjr_render`` saves a whole pass per frame (a third of the work when segmentation
    is also recorded); depth is linearized exactly as ``mujoco.Renderer`` does it."""

    def render_rgb_depth(self, *, rgb: bool, depth: bool) -> tuple[np.ndarray, np.ndarray]:
        color = np.empty((self._height, self._width, 3), dtype=np.uint8) if rgb else None
        raw = np.empty((self._height, self._width), dtype=np.float32) if depth else None
        if self._gl_context:
            self._gl_context.make_current()
        mujoco.mjr_render(self._rect, self._scene, self._mjr_context)
        mujoco.mjr_readPixels(color, raw, self._rect, self._mjr_context)
        metres = None
        if raw is not None:
            extent = self._model.stat.extent
            near = np.float32(self._model.vis.map.znear * extent)
            far = np.float32(self._model.vis.map.zfar * extent)
            c_coef = np.float32(-0.5) * (-(far + near) / (far - near)) - np.float32(0.5)
            d_coef = np.float32(-0.5) * (-(np.float32(2) * far * near) / (far - near))
            metres = (d_coef / (raw.astype(np.float64) + c_coef)).astype(np.float32)
        if self._gl_context:
            color = None if color is None else np.flipud(color)
            metres = None if metres is None else np.flipud(metres)
        return color, metres  # type: ignore[return-value]

    def render_segmentation(self, segment_labels: np.ndarray) -> np.ndarray:
        """One id-colour pass: each pixel's label (``segment_labels[segid + 1]``).

        The same pass as ``mujoco.Renderer``'s segmentation mode (flags ``mjRND_SEGMENT`` and
        ``mjRND_IDCOLOR``, colour ``segid + 1`` in 24 bits), with the id -> label table
        built while culling instead of by a second walk over the scene's geoms."""
        flags = self._scene.flags
        saved = flags.copy()
        flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 1
        flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 1
        colour = np.empty((self._height, self._width, 3), dtype=np.uint8)
        try:
            if self._gl_context:
                self._gl_context.make_current()
            mujoco.mjr_render(self._rect, self._scene, self._mjr_context)
            mujoco.mjr_readPixels(colour, None, self._rect, self._mjr_context)
        finally:
            np.copyto(flags, saved)
        ids = colour.astype(np.int32)
        segment = ids[..., 0] | (ids[..., 1] << 8) | (ids[..., 2] << 16)
        labels = segment_labels[np.minimum(segment, len(segment_labels) - 1)]
        return np.ascontiguousarray(np.flipud(labels)) if self._gl_context else labels


class CameraRenderer:
    """Every camera of a task, rendered on one compiled model (one renderer per image size).

    ``mount_bodies`` gives each mounted camera's body id (resolved and validated by the
    rig); the renderer is bound to ``model`` and must be rebuilt when the model is.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        cameras: Sequence[CameraSpec],
        labels: SegmentationLabels,
        mount_bodies: dict[str, int],
        *,
        backend: str | None = None,
    ) -> None:
        ensure_backend(backend, max_pixels=max(c.width * c.height for c in cameras))
        prepare_model(model, cameras)
        self.model = model
        self.cameras = tuple(cameras)
        self.labels = labels
        self._mount_bodies = dict(mount_bodies)
        self.culling = True  # off only to measure what culling saves (bench_cameras)
        self._local = {
            c.name: (np.asarray(c.pose.position_m, dtype=np.float64),
                     _quat_matrix(c.pose.orientation()))
            for c in self.cameras
        }
        self._option = mujoco.MjvOption()
        self._option.sitegroup[:] = 0
        self._option.geomgroup[HIDDEN_GEOM_GROUP] = 0
        self._free = mujoco.MjvCamera()
        self._free.type = mujoco.mjtCamera.mjCAMERA_FREE
        mujoco.mjv_defaultFreeCamera(model, self._free)
        self._renderers: dict[tuple[int, int], _Renderer] = {}
        try:
            for camera in self.cameras:
                size = (camera.height, camera.width)
                if size not in self._renderers:
                    renderer = _Renderer(model, height=camera.height, width=camera.width)
                    flags = renderer.scene.flags
                    for flag in (
                        mujoco.mjtRndFlag.mjRND_SHADOW,
                        mujoco.mjtRndFlag.mjRND_REFLECTION,
                        mujoco.mjtRndFlag.mjRND_SKYBOX,
                        mujoco.mjtRndFlag.mjRND_FOG,
                        mujoco.mjtRndFlag.mjRND_HAZE,
                    ):
                        flags[flag] = 0
                    self._renderers[size] = renderer
        except BaseException:
            self.close()
            raise
        self._geom_label = np.concatenate([labels.geom_label, [0]]).astype(labels.dtype)

    def pose(self, camera: CameraSpec, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """World position and rotation matrix (columns: camera x, y, z) of ``camera``."""
        position, rotation = self._local[camera.name]
        if camera.mount is None:
            return position.copy(), rotation
        body = self._mount_bodies[camera.name]
        body_rotation = data.xmat[body].reshape(3, 3)
        return data.xpos[body] + body_rotation @ position, body_rotation @ rotation

    def _place(
        self, renderer: _Renderer, camera: CameraSpec, data: mujoco.MjData
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Update the scene for ``camera``; its pose and the segmentation id -> label table."""
        position, rotation = self.pose(camera, data)
        self.model.vis.global_.fovy = camera.fovy_deg
        renderer.update_scene(data, camera=self._free, scene_option=self._option)
        scene = renderer.scene
        forward, up = -rotation[:, 2], rotation[:, 1]
        near = scene.camera[0].frustum_near
        half = near * math.tan(math.radians(camera.fovy_deg) / 2)
        for eye in (0, 1):  # mono rendering averages both eyes: give both the same pose
            gl = scene.camera[eye]
            gl.pos[:] = position
            gl.forward[:] = forward
            gl.up[:] = up
            gl.frustum_center = 0.0
            gl.frustum_bottom = -half
            gl.frustum_top = half
        _add_light(scene, _KEY_LIGHT_DIR, 0.55)
        _add_light(scene, _FILL_LIGHT_DIR, 0.2)
        segment_labels = self._cull(scene, position, rotation, camera, near)
        return position, rotation, segment_labels

    def _cull(
        self,
        scene: mujoco.MjvScene,
        position: np.ndarray,
        rotation: np.ndarray,
        camera: CameraSpec,
        near: float,
    ) -> np.ndarray:
        """Drop the model geoms whose bounding sphere lies wholly outside the view frustum;
        return the label of each segmentation id (index ``segid + 1``; 0 is background).

        On CPU rasterizers the cost of a pass is the triangles sent, not the pixels: most
        of the arm is outside a wrist camera's view. A geom wholly outside the frustum
        yields no fragment in any pass (no shadows, no reflections), so marking it
        ``mjGEOM_NONE`` (which ``mjr_render`` draws as nothing) leaves every image
        byte-identical and only saves work. The scene's geoms are read once here, for the
        culling and the label table together (per-geom access is the slow part in Python)."""
        count = scene.ngeom
        # One more entry than ids: any colour past the last id reads as background.
        segment_labels = np.zeros(count + 2, dtype=self._geom_label.dtype)
        if count == 0:
            return segment_labels
        centres = np.empty((count, 3), dtype=np.float64)
        radii = np.full(count, -1.0)
        geoms = scene.geoms
        for i in range(count):
            geom = geoms[i]
            centres[i] = geom.pos
            objid = geom.objid
            if geom.objtype == _OBJ_GEOM and 0 <= objid < self.model.ngeom:
                segid = geom.segid
                if 0 <= segid < count:
                    segment_labels[segid + 1] = self._geom_label[objid]
                radius = float(self.model.geom_rbound[objid])
                if radius > 0.0:  # planes (and anything unbounded) report 0: always kept
                    radii[i] = radius * _CULL_MARGIN + 1e-6
        local = (centres - position) @ rotation  # camera axes: x right, y up, -z forward
        x, y, z = local[:, 0], local[:, 1], -local[:, 2]
        half_v = math.radians(camera.fovy_deg) / 2
        half_h = math.atan(math.tan(half_v) * camera.width / camera.height)
        far = scene.camera[0].frustum_far
        outside = (
            (z + radii < near)
            | (z - radii > far)
            | (np.abs(y) * math.cos(half_v) - z * math.sin(half_v) > radii)
            | (np.abs(x) * math.cos(half_h) - z * math.sin(half_h) > radii)
        ) & (radii > 0)
        if self.culling:
            for i in np.flatnonzero(outside):
                geoms[int(i)].type = _GEOM_NONE
        return segment_labels

    def render(self, data: mujoco.MjData, camera: CameraSpec) -> CameraFrame:
        """All modalities of ``camera`` for the current ``data`` (after mj_step/forward)."""
        renderer = self._renderers[(camera.height, camera.width)]
        position, rotation, segment_labels = self._place(renderer, camera, data)
        images: dict[str, np.ndarray] = {}
        want_rgb, want_depth = "rgb" in camera.modalities, "depth" in camera.modalities
        if want_rgb or want_depth:
            rgb, depth = renderer.render_rgb_depth(rgb=want_rgb, depth=want_depth)
            if want_rgb:
                images["rgb"] = np.ascontiguousarray(rgb)
            if want_depth:
                images["depth"] = depth_to_mm(depth, far_m=renderer.scene.camera[0].frustum_far)
        if "segmentation" in camera.modalities:
            images["segmentation"] = renderer.render_segmentation(segment_labels)
        return CameraFrame(images, position, _matrix_quat(rotation))

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers = {}


def depth_to_mm(depth_m: np.ndarray, *, far_m: float) -> np.ndarray:
    """Z-depth in metres -> uint16 millimetres; 0 where nothing was hit (the far plane)."""
    millimetres = np.rint(np.asarray(depth_m, dtype=np.float64) * 1000.0)
    millimetres[np.asarray(depth_m) >= 0.999 * far_m] = 0
    return np.clip(millimetres, 0, DEPTH_MAX_MM).astype(np.uint16)
