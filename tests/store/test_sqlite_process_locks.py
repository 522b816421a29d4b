"""A second store on the same SQLite file in one process must not cancel the first's locks.

POSIX drops every fcntl lock a process holds on a file when the process closes any
descriptor of that file. The store once opened (and closed) the database file itself to check
its header before each new engine, which silently cancelled the locks SQLite's connections
of an earlier store held: another process could then take the file exclusively (and, at its
close, check the WAL into the file and delete it under the first store's connections). The
attack here is a probe in another process asking the kernel whether anyone still holds
SQLite's shared lock while the first store reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from store import EventStore
from tests.store.eventgen import created

_PROBE = """
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
# SQLite's unix VFS: shared locks are read locks on 510 bytes after PENDING_BYTE + 2.
ask = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0x40000000 + 2, 510, 0)
answer = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, ask))
print("held" if answer[0] != fcntl.F_UNLCK else "free")
"""


def _shared_lock(db: Path) -> str:
    result = subprocess.run([sys.executable, "-c", _PROBE, str(db)], capture_output=True,
                            text=True, check=True)
    return result.stdout.strip()


def test_opening_a_second_store_keeps_the_first_stores_locks(tmp_path: Path) -> None:
    db = tmp_path / "assetcast.db"
    url = f"sqlite:///{db}"
    first = EventStore(url)
    first.append("run-a", [created("run-a")], expected_version=0)
    with first.engine.connect() as reading:
        reading.exec_driver_sql("SELECT count(*) FROM events").all()
        assert _shared_lock(db) == "held"
        second = EventStore(url)
        second.close()
        assert _shared_lock(db) == "held"
        again = EventStore(url, read_only=True)
        assert again.read("run-a")[0].type == "RunCreated"
        again.close()
        assert _shared_lock(db) == "held"
    first.close()

