"""The per-role preparation summary as a projection of the log."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtime.preparation.summary import rejection_reason, role_summaries, summary_lines


@pytest.mark.parametrize(
    ("detail", "reason"),
    [
        ("/c/b-1/asset.catalog.json: descriptor.category: expected a nonempty string",
         "descriptor.category: expected a nonempty string"),
        ("mesh_too_large: /c/b-1/mesh.stl has 900 faces, limit 500 (max_mesh_faces)",
         "mesh_too_large: mesh.stl has 900 faces, limit 500 (max_mesh_faces)"),
        ("/c/b-1/mesh.obj:3: mtllib: referenced file 'x.mtl' is missing",
         "mesh.obj:3: mtllib: referenced file 'x.mtl' is missing"),
        ("", "AssetValidationError"),
        ("x" * 300, "x" * 157 + "..."),
    ],
)
def test_rejection_reasons_drop_the_package_path(detail: str, reason: str) -> None:
    assert rejection_reason("AssetValidationError", detail) == reason


def _event(seq: int, kind: str, **payload: object) -> SimpleNamespace:
    return SimpleNamespace(seq=seq, type=kind, payload=payload)


def test_latest_outcome_wins_and_reasons_are_ranked() -> None:
    events = [
        _event(1, "RunCreated", providers={"item": {}, "bin": {}, "tool": {}}),
        _event(2, "CandidatesListed", role="item", candidate_ids=["a", "b", "c", "d", "e"],
               limit=5),
        _event(3, "CandidateRejected", role="item", candidate_id="a", stage="materialize",
               error_type="E", detail="/p/a: zeta"),
        _event(4, "CandidateRejected", role="item", candidate_id="b", stage="materialize",
               error_type="E", detail="/p/b: alpha"),
        _event(5, "CandidateRejected", role="item", candidate_id="c", stage="materialize",
               error_type="E", detail="/p/c: zeta"),
        _event(6, "CandidatePrepared", role="item", candidate_id="d"),
        _event(7, "CandidateRejected", role="item", candidate_id="e", stage="materialize",
               error_type="E", detail="/p/e: beta"),
        _event(8, "CandidateRejected", role="item", candidate_id="f", stage="materialize",
               error_type="E", detail="/p/f: gamma"),
        _event(9, "CandidatePrepared", role="item", candidate_id="a"),  # resumed: now fine
        _event(10, "CandidateListingFailed", role="tool", error_type="AssetValidationError",
               detail="/x: catalog folder does not exist"),
        _event(11, "CandidatesListed", role="bin", candidate_ids=[], limit=32),
    ]
    assert summary_lines(role_summaries(events)) == [
        "role bin: saw 0 candidate(s), prepared 0, rejected 0",
        "role item: saw 5 candidate(s) (limit 5), prepared 2, rejected 4",
        "  1 x alpha",
        "  1 x beta",
        "  1 x gamma",
        "  ... and 1 other reason(s); see preparation.report.json",
        "role tool: listing failed: AssetValidationError: /x: catalog folder does not exist",
    ]
