"""``geomlin.load`` (geomlin.deploy.loading, issue 31): a ``geomlin train`` checkpoint (or run folder) or a
package in, a ready module out.

Oracle: the test metrics ``geomlin train`` recorded in the checkpoint while the model was in
memory (the loaded model must reproduce its test force MAE on the same split), and the eager
model for the package. The package round trip compiles with AOTInductor: slow.
"""

import functools

import pytest
import torch

import geomlin
from geomlin.__main__ import main
from geomlin.train.checkpoint import load_checkpoint
from geomlin.train.errors import UserError
from geomlin.train.tasks import get_task

QUICK = ["--quick", "--no-progress", "--threads", "1"]


@functools.lru_cache(maxsize=1)
def _run(tmp_root: str) -> str:
    out = f"{tmp_root}/molecules"
    assert main(["train", "molecules", "--model", "gaunt,egnn", *QUICK, "--out", out]) == 0
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(str(tmp_path_factory.mktemp("load")))


def test_loaded_model_reproduces_the_recorded_test_metrics(run):
    ckpt = load_checkpoint(f"{run}/checkpoint.pt")
    task = get_task("molecules")
    cfg = dict(ckpt["config"])
    task.validate(cfg)
    test = task.build_data(cfg).evals["test"]
    for name in ("gaunt", "egnn"):
        model = geomlin.load(run, model=name)
        assert not model.training
        _, forces = model(test["pos"], test["z"])
        recorded = ckpt["history"][-1][f"{name}/test_force_mae"]
        assert float((forces - test["forces"]).abs().mean()) == pytest.approx(recorded, rel=1e-5)


def test_card_declared_types_and_dtype(run):
    model = geomlin.load(f"{run}/checkpoint.pt", model="gaunt", dtype=torch.float64)
    assert next(model.parameters()).dtype == torch.float64
    card = model.card
    assert (card.task, card.name) == ("molecules", "gaunt")
    assert (card.units.energy, card.units.length) == ("kcal/mol", "Angstrom")
    assert card.species == {1: 1, 6: 6, 8: 8}
    assert card.data["data"].endswith("xtb_md_ethanol.npz") and card.config["num_train"] == 64
    assert repr(model.type_in) == "(Positions(3) under E(3), Labels(9))"


@pytest.mark.parametrize("kind, words", [
    ("several", "holds the models gaunt, egnn; choose one with model="),
    ("unknown", "has no model 'mace'; it holds gaunt, egnn"),
    ("missing", "checkpoint or package not found: "),
    ("empty folder", "is a folder without a checkpoint.pt"),
    ("junk", "junk.pt"),
    ("pickle", "could run code from the file"),
])
def test_bad_paths_and_names_are_one_line_errors_naming_the_file(run, tmp_path, kind, words):
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "empty").mkdir()
    torch.save({"format": "geomlin-checkpoint", "x": functools.partial(print, "pwned")}, tmp_path / "evil.pt")
    target, model = {"several": (run, None), "unknown": (run, "mace"), "missing": (tmp_path / "nope.pt", None),
                     "empty folder": (tmp_path / "empty", None), "junk": (tmp_path / "junk.pt", None),
                     "pickle": (tmp_path / "evil.pt", None)}[kind]
    with pytest.raises(UserError) as info:
        geomlin.load(target, model=model)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_audit_and_export_take_a_run_folder(run, capsys, tmp_path):
    assert main(["audit", run, "--model", "gaunt", "--samples", "2"]) == 0
    assert "gaunt" in capsys.readouterr().out
    assert main(["export", run, "--out", str(tmp_path / "m.zip")]) == 2
    assert ".pt2" in capsys.readouterr().err


@pytest.mark.slow
def test_package_loads_with_the_checkpoint_outputs_and_card(run, tmp_path):
    pkg = tmp_path / "gaunt.pt2"
    assert main(["export", run, "--model", "gaunt", "--out", str(pkg)]) == 0
    eager, packaged = geomlin.load(run, model="gaunt"), geomlin.load(pkg)
    assert packaged.card.units == eager.card.units and packaged.card.species == eager.card.species
    assert repr(packaged.type_in) == repr(eager.type_in)
    g = torch.Generator().manual_seed(0)
    pos, species = 1.5 * torch.randn(3, 7, 3, generator=g), torch.tensor([1, 6, 8, 1, 1, 6, 1]).expand(3, -1)
    for got, want in zip(packaged(pos, species), eager(pos, species)):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-4)
    with pytest.raises(UserError, match="exported for dtype torch.float32, not torch.float64"):
        geomlin.load(pkg, dtype=torch.float64)
    with pytest.raises(UserError, match="holds one model"):
        geomlin.load(pkg, model="egnn")


def test_calculator_reads_a_run_folder_with_its_units(run):
    ase = pytest.importorskip("ase")
    from geomlin.deploy.calculator import GeomlinCalculator
    from tests.deploy.potentials import ethanol

    numbers, pos, _, _ = ethanol(slice(0, 1))
    atoms = ase.Atoms(numbers=numbers.numpy(), positions=pos[0].numpy())
    atoms.calc = GeomlinCalculator(run, model_name="egnn")
    energy, _ = geomlin.load(run, model="egnn")(pos.float(), numbers[None])
    assert atoms.get_potential_energy() == pytest.approx(float(energy) * ase.units.kcal / ase.units.mol, rel=1e-6)
