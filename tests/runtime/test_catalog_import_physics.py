"""``catalog import --mass/--density/--friction``: physics in the descriptor, one-line errors
naming the flag, and the imported asset's mass in the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trimesh

from runtime.cli import main
from runtime.sim.contact import OBJECT_FRICTION
from runtime.sim.geometry import package_geometry
from tests.cli_logging import reset_cli_logging  # noqa: F401 (autouse)


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    path = tmp_path / "block.obj"
    trimesh.creation.box((0.04, 0.04, 0.04)).export(path)
    return path


def _argv(source: Path, catalog: Path, *extra: str) -> list[str]:
    return [
        "catalog", "import", str(source), "--out", str(catalog), "--id", "b",
        "--category", "block", "--log-level", "warning", *extra,
    ]


def test_physics_flags_land_in_the_descriptor(
    tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog"
    assert main(_argv(source, catalog, "--mass", "0.25", "--friction", "0.7,0.02")) == 0
    assert '  physics: {"friction": {"sliding": 0.7, "torsional": 0.02}, "mass_kg": 0.25}\n' in (
        capsys.readouterr().out
    )
    manifest = json.loads((catalog / "b" / "asset.catalog.json").read_text())
    assert manifest["descriptor"]["physics"] == {
        "mass_kg": 0.25, "friction": {"sliding": 0.7, "torsional": 0.02}
    }
    assert main(["catalog", "check", str(catalog), "--log-level", "warning"]) == 0
    geometry = package_geometry("item", catalog / "b" / "asset.catalog.json", 500.0)
    assert (geometry.mass, geometry.friction) == (0.25, (0.7, 0.02, OBJECT_FRICTION[2]))
    dense = tmp_path / "dense"
    assert main(_argv(source, dense, "--density", "1200")) == 0
    manifest = json.loads((dense / "b" / "asset.catalog.json").read_text())
    assert manifest["descriptor"]["physics"] == {"density_kg_m3": 1200.0}
    plain = tmp_path / "plain"
    assert main(_argv(source, plain)) == 0
    assert "physics" not in json.loads((plain / "b" / "asset.catalog.json").read_text())[
        "descriptor"
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mass", "-1"], "--mass: must be positive, got -1.0"),
        (["--mass", "1", "--density", "800"], "--density: give --mass or --density, not both"),
        (["--density", "0"], "--density: must be positive, got 0.0"),
        (["--friction", "a,b"], "--friction: expected SLIDING[,TORSIONAL[,ROLLING]] numbers, "
         "got 'a,b'"),
        (["--friction", "1,0.1,0.1,0.1"], "--friction: expected SLIDING[,TORSIONAL[,ROLLING]], "
         "got 4 numbers"),
        (["--friction", "0.5,-1"], "--friction (torsional): must not be negative, got -1.0"),
    ],
)
def test_bad_physics_flags_are_one_line_errors(
    tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str],
    flags: list[str], message: str,
) -> None:
    catalog = tmp_path / "catalog"
    assert main(_argv(source, catalog, *flags)) == 2
    assert capsys.readouterr().err == f"assetcast: error: {message}\n"
    assert not catalog.exists()


def _urdf(tmp_path: Path, body_mass: str, handle_mass: str) -> Path:
    """pybullet style: <contact> friction and <inertial> mass per link, a fixed handle."""
    path = tmp_path / "mug.urdf"
    path.write_text(
        '<robot name="mug">'
        '<link name="base"><contact><lateral_friction value="0.8"/>'
        '<rolling_friction value="0.0"/><inertia_scaling value="3.0"/></contact>'
        f'<inertial><mass value="{body_mass}"/></inertial>'
        '<visual><geometry><box size="0.06 0.06 0.08"/></geometry></visual></link>'
        f'<link name="handle"><inertial><mass value="{handle_mass}"/></inertial>'
        '<visual><geometry><box size="0.02 0.01 0.04"/></geometry></visual></link>'
        '<joint name="j" type="fixed"><parent link="base"/><child link="handle"/>'
        '<origin xyz="0.04 0 0"/></joint></robot>'
    )
    return path


def test_a_urdf_states_mass_and_friction_and_flags_override_them(tmp_path: Path) -> None:
    from runtime.assets.importing import ImportOptions, import_asset

    urdf = _urdf(tmp_path, ".3", "0.05")
    stated = import_asset(urdf, tmp_path / "a", ImportOptions("mug", "mug")).descriptor
    assert stated.to_dict()["physics"] == {
        "mass_kg": pytest.approx(0.35), "friction": {"sliding": 0.8, "rolling": 0.0}
    }
    assert stated.provenance["physics_from"] == {
        "mass_kg": "URDF <inertial><mass> (sum over links)",
        "friction.sliding": "URDF <contact><lateral_friction> of link 'base'",
        "friction.rolling": "URDF <contact><rolling_friction> of link 'base'",
    }
    overridden = import_asset(
        urdf, tmp_path / "b",
        ImportOptions("mug", "mug", density_kg_m3=900.0, friction=(0.4,)),
    ).descriptor
    assert overridden.to_dict()["physics"] == {
        "density_kg_m3": 900.0, "friction": {"sliding": 0.4, "rolling": 0.0}
    }
    assert overridden.provenance["physics_from"]["friction.sliding"] == "--friction"
    static = import_asset(
        _urdf(tmp_path, "0", "0"), tmp_path / "c", ImportOptions("tray", "tray")
    ).descriptor  # pybullet's "static" mass 0 is not a weight
    assert static.to_dict()["physics"] == {"friction": {"sliding": 0.8, "rolling": 0.0}}


def test_a_negative_urdf_mass_is_refused_naming_the_link(tmp_path: Path) -> None:
    from domain.errors import AssetValidationError
    from runtime.assets.importing import ImportOptions, import_asset

    urdf = _urdf(tmp_path, "0.3", "-1")
    with pytest.raises(AssetValidationError) as caught:
        import_asset(urdf, tmp_path / "a", ImportOptions("mug", "mug"))
    assert str(caught.value) == f"{urdf}: link 'handle': inertial mass: must not be negative"


def test_check_warns_when_a_mass_looks_like_grams(
    tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog"
    assert main(_argv(source, catalog, "--mass", "350")) == 0  # a 4 cm cube of 350 kg
    capsys.readouterr()
    assert main(["catalog", "check", str(catalog), "--log-level", "warning"]) == 0
    warns = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warn")]
    assert warns == [
        f"warn  {catalog / 'b'}: physics.mass_kg 350 kg over a collision volume of 64 cm^3 is "
        "a density of 5.47e+06 kg/m^3, outside 5-25000: was it given in grams?"
    ]
    plausible = tmp_path / "plausible"
    assert main(_argv(source, plausible, "--mass", "0.35")) == 0
    capsys.readouterr()
    assert main(["catalog", "check", str(plausible), "--log-level", "warning"]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("warn")]
