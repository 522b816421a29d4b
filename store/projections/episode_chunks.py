"""Per-episode state of a projection kept in chunks of episodes, snapshotted chunk by chunk.

Why: a report that lists every episode (``report.json``, the run report) is as long as the
history. Stored whole, its snapshot made every boundary append rewrite the whole answer
(141 MB at 1M events). Here the episodes of a batch are grouped by index into chunks of
``CHUNK_EPISODES``; a snapshot stores only the chunks that changed since the previous one
(an episode is done once and never touched again unless re-run, so old chunks are
immutable in practice) plus a small head naming every chunk (seq, body SHA-256 and a
per-chunk summary the answer's totals are computed from without loading the chunk).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from store.projections.incremental import ChunkedProjector, ChunkMissing

CHUNK_EPISODES = 256
"""Episodes per chunk (episode indices ``c*256 .. c*256+255`` of one batch)."""

_SHA_CHARS = frozenset("0123456789abcdef")

ChunkId = tuple[int, int]


class EpisodeChunk:
    """The attempts of one chunk of a batch's episodes, by episode index; which are done
    (their commit-or-discard is in the log; a re-run makes it undone again); and ``extra``,
    per-episode facts that outlive a re-run (e.g. the last receipt naming camera files)."""

    __slots__ = ("attempts", "done", "extra")

    def __init__(self) -> None:
        self.attempts: dict[int, dict[str, Any]] = {}
        self.done: set[int] = set()
        self.extra: dict[int, Any] = {}

    def body(self) -> dict[str, Any]:
        done = self.done
        return {
            "attempts": [[e, attempt, e in done] for e, attempt in self.attempts.items()],
            "extra": [[e, value] for e, value in self.extra.items()],
        }


def chunk_of(batch_index: int, episode_index: int) -> ChunkId:
    return batch_index, episode_index // CHUNK_EPISODES


def chunk_name(cid: ChunkId) -> str:
    return f"{cid[0]}.{cid[1]}"


def _chunk_id(name: str) -> ChunkId:
    batch, _, chunk = name.partition(".")
    return int(batch), int(chunk)


def _index(e: Any, cid: ChunkId) -> int:
    if type(e) is not int or e // CHUNK_EPISODES != cid[1]:
        raise ValueError(f"episode {e!r} is not in chunk {chunk_name(cid)}")
    return e


def decode_chunk(cid: ChunkId, body: Any) -> EpisodeChunk:
    """A stored chunk body, strictly (ChunkMissing if it is not one of chunk ``cid``)."""
    try:
        if not isinstance(body, dict) or set(body) != {"attempts", "extra"}:
            raise ValueError("unexpected fields")
        chunk = EpisodeChunk()
        for e, attempt, done in body["attempts"]:
            if not isinstance(attempt, dict) or type(done) is not bool:
                raise ValueError(f"bad attempt entry for episode {e!r}")
            chunk.attempts[_index(e, cid)] = attempt
            if done:
                chunk.done.add(e)
        for e, value in body["extra"]:
            chunk.extra[_index(e, cid)] = value
    except (TypeError, ValueError) as exc:
        raise ChunkMissing(f"chunk {chunk_name(cid)} does not decode: {exc}") from None
    return chunk


class EpisodeChunked(ChunkedProjector):
    """Base of a projector whose per-episode state lives in :class:`EpisodeChunk` s.

    Subclasses name a chunk's ``summary`` (numbers stored in the head, so totals need no
    chunk loaded) and dump/restore the rest of their head around :meth:`_dump_chunks` /
    :meth:`_restore_chunks`."""

    SUMMARY_FIELDS = 0

    def __init__(self) -> None:
        super().__init__()
        self.chunks: dict[ChunkId, EpisodeChunk] = {}
        # Stored chunks: (batch, chunk) -> (seq, body_sha256, *summary).
        self.manifest: dict[ChunkId, tuple[Any, ...]] = {}
        self.dirty: set[ChunkId] = set()

    def summary(self, chunk: EpisodeChunk) -> tuple[int, ...]:
        return ()

    # -- chunks -------------------------------------------------------------------------
    def _load(self, cid: ChunkId) -> EpisodeChunk:
        seq, sha, *summary = self.manifest[cid]
        if self.loader is None:
            raise ChunkMissing(f"chunk {chunk_name(cid)} is not resident and nothing loads it")
        chunk = decode_chunk(cid, self.loader(chunk_name(cid), seq, sha))
        if list(self.summary(chunk)) != summary:
            raise ChunkMissing(f"chunk {chunk_name(cid)} does not hold what its head says")
        return chunk

    def chunk(self, cid: ChunkId, *, create: bool) -> EpisodeChunk | None:
        """The chunk ``cid`` resident (loaded if stored), or new if ``create``; None if it
        has no episode."""
        found = self.chunks.get(cid)
        if found is None:
            if cid in self.manifest:
                found = self.chunks[cid] = self._load(cid)
            elif create:
                found = self.chunks[cid] = EpisodeChunk()
        return found

    def peek(self, cid: ChunkId) -> EpisodeChunk:
        """Chunk ``cid`` to read, loaded for the caller only when not resident (memory: one
        chunk at a time while an answer is walked)."""
        return self.chunks.get(cid) or self._load(cid)

    def chunk_ids(self) -> list[ChunkId]:
        return sorted(set(self.chunks) | set(self.manifest))

    def chunk_summary(self, cid: ChunkId) -> tuple[int, ...]:
        found = self.chunks.get(cid)
        return self.summary(found) if found is not None else tuple(self.manifest[cid][2:])

    def dirty_chunks(self) -> Iterator[tuple[str, Any]]:
        for cid in sorted(self.dirty):
            yield chunk_name(cid), self.chunks[cid].body()

    def chunk_stored(self, name: str, seq: int, sha256: str) -> None:
        cid = _chunk_id(name)
        self.manifest[cid] = (seq, sha256, *self.summary(self.chunks[cid]))
        self.dirty.discard(cid)

    def evict(self) -> None:
        for cid in [cid for cid in self.chunks if cid not in self.dirty and cid in self.manifest]:
            del self.chunks[cid]

    def load_all(self) -> None:
        for cid in self.manifest:
            self.chunk(cid, create=False)

    # -- the head -----------------------------------------------------------------------
    def _dump_chunks(self) -> list[list[Any]]:
        if self.dirty:
            raise ValueError(f"{self.KIND}: dump with chunks not yet stored")
        return [[*cid, *entry] for cid, entry in sorted(self.manifest.items())]

    def _restore_chunks(self, entries: Any) -> None:
        self.chunks, self.manifest, self.dirty = {}, {}, set()
        for entry in entries:
            if not isinstance(entry, list) or len(entry) != 4 + self.SUMMARY_FIELDS:
                raise ValueError(f"bad chunk entry {entry!r}")
            b, c, seq, sha, *summary = entry
            if any(type(n) is not int or n < 0 for n in (b, c, seq, *summary)):
                raise ValueError(f"bad chunk entry {entry!r}")
            if not isinstance(sha, str) or len(sha) != 64 or not set(sha) <= _SHA_CHARS:
                raise ValueError(f"bad chunk digest {sha!r}")
            self.manifest[(b, c)] = (seq, sha, *summary)
