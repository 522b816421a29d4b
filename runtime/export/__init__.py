"""Training datasets as projections of the log: LeRobot v3.0 and robomimic HDF5.

One reader of committed episodes (:mod:`.episodes`), one module per format (:mod:`.lerobot`,
:mod:`.robomimic`), one way to publish a version atomically (:mod:`.publish`), and one entry
point used by both `assetcast export` and live datasets during collection (:mod:`.dataset`).
"""

from runtime.export.dataset import FORMATS, DatasetSpec, DatasetVersion, build_version
from runtime.export.record import export_runs
from runtime.export.verify import DatasetCheck, verify_dataset

__all__ = [
    "FORMATS",
    "DatasetCheck",
    "DatasetSpec",
    "DatasetVersion",
    "build_version",
    "export_runs",
    "verify_dataset",
]
