"""Run inside the separate LeRobot venv (never imported by the project's tests).

``python official_loader_check.py LEROBOT_DIR ROBOMIMIC_FILE EXPECTED.npz`` loads the LeRobot
dataset with the official ``LeRobotDataset`` (local root, hub offline) through both of its video
backends, pyav and torchcodec (LeRobot's default, which needs system FFmpeg), and, if
robomimic imports, the HDF5 file with robomimic's ``SequenceDataset``; compares frames with the
expected arrays and prints one JSON line of findings.
"""

from __future__ import annotations

import json
import sys

import numpy as np

_VIDEOS: dict = {}


def _video_frames(root: str, ds: object, episode: int, key: str) -> np.ndarray:
    """The episode's frames of ``key`` decoded straight from its MP4 (PyAV), for comparison."""
    import av

    path = f"{root}/{ds.meta.get_video_file_path(episode, key)}"  # type: ignore[attr-defined]
    if path not in _VIDEOS:
        with av.open(path) as container:
            _VIDEOS[path] = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return _VIDEOS[path]


def check_lerobot(root: str, expected: dict, backend: str) -> dict:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("assetcast/export-test", root=root, video_backend=backend)
    starts = expected["episode_starts"]
    lengths = expected["episode_lengths"]
    checked = 0
    mismatches = []
    for episode, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        for frame in sorted({0, 1, length // 2, length - 1}):
            item = ds[int(start + frame)]
            row = int(start + frame)
            for key, name in (("observation.state", "state"), ("action", "action")):
                got = item[key].numpy()
                if not np.array_equal(got, expected[name][row]):
                    mismatches.append(f"{key} of frame {row}")
            if int(item["episode_index"]) != episode or int(item["frame_index"]) != frame:
                mismatches.append(f"indices of frame {row}")
            if abs(float(item["timestamp"]) - frame / ds.fps) > 1e-4:
                mismatches.append(f"timestamp of frame {row}")
            if item["task"] != str(expected["task"]):
                mismatches.append(f"task of frame {row}: {item['task']!r}")
            for key in ds.meta.video_keys:
                want = _video_frames(root, ds, episode, key)[frame]
                got = (item[key].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
                if not np.array_equal(got, want):
                    mismatches.append(f"{key} of frame {row}")
            checked += 1
    return {
        "frames": len(ds),
        "episodes": ds.num_episodes,
        "fps": ds.fps,
        "checked": checked,
        "mismatches": mismatches,
        "stats_keys": sorted(ds.meta.stats["action"]),
        "video_keys": list(ds.meta.video_keys),
    }


def check_robomimic(path: str, expected: dict) -> dict:
    try:
        import robomimic.utils.obs_utils as obs_utils
        from robomimic.utils.dataset import SequenceDataset
    except ImportError as error:
        return {"skipped": str(error)}
    keys = ["robot_qpos", "robot_qvel", "entity_pose", "finger_width"]
    obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": keys}})
    ds = SequenceDataset(
        hdf5_path=path, obs_keys=keys, dataset_keys=("actions", "rewards", "dones"),
        load_next_obs=True, frame_stack=1, seq_length=1, pad_frame_stack=True,
        pad_seq_length=True, get_pad_mask=False, goal_mode=None, hdf5_cache_mode=None,
        hdf5_use_swmr=True, hdf5_normalize_obs=False, filter_by_attribute=None,
    )
    first = ds[0]
    ok = bool(
        np.allclose(first["actions"][0], expected["action"][0], atol=1e-6)
        and np.allclose(first["obs"]["robot_qpos"][0], expected["state"][0], atol=1e-6)
    )
    length = len(ds)
    ds.close_and_delete_hdf5_handle()
    return {"samples": length, "first_matches": ok}


def main() -> None:
    root, hdf5, npz = sys.argv[1:4]
    expected = dict(np.load(npz))
    result = {
        "lerobot": check_lerobot(root, expected, "pyav"),
        "lerobot_torchcodec": check_lerobot(root, expected, "torchcodec"),
        "robomimic": check_robomimic(hdf5, expected),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
