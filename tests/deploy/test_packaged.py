"""Packages check their inputs before the graph runs (geomlin.deploy.packaged, issue 31).

Oracle: the eager potential on the same (valid, contiguous) inputs. The checks are tested fast on
a ``torch.export`` program of the same graph as the package (the checks do not depend on how the
graph is compiled); the slow test compiles a real AOTInductor package, repeats them through
``geomlin.load`` and shows what a bare ``aoti_load_package`` call does with a non-contiguous view
(wrong numbers, no error: what the checks prevent).
"""

import functools

import pytest
import torch

import geomlin
from geomlin import deploy
from geomlin.deploy.packaged import PackagedModel
from tests.deploy.potentials import ethanol, trained_ethanol_potential

RTOL, ATOL = 1e-5, 1e-4


@functools.lru_cache(maxsize=1)
def _program():
    model = trained_ethanol_potential()
    numbers, pos, _, _ = ethanol(slice(0, 2))
    args = (pos.float(), numbers.expand(2, -1).clone())
    return model, deploy.export(model, args), deploy.build_metadata(model, args)


@pytest.fixture
def packaged():
    model, program, meta = _program()
    return model, PackagedModel(program.module(), meta, "ethanol.pt2")


def _frames(n=3, atoms=9):
    numbers, pos, _, _ = ethanol(slice(0, n))
    return pos[:, :atoms].float().contiguous(), numbers[:atoms].expand(n, -1).clone()


def test_metadata_records_specs_units_and_species():
    _, _, meta = _program()
    specs = {s["name"]: s for s in meta["program_inputs"]}
    assert specs["pos"]["dims"] == ["batch", "items", 3] and specs["pos"]["dtype"] == "float32"
    assert specs["species"]["labels"] == 9 and specs["species"]["dtype"] == "int64"
    assert meta["dims"] == {"batch": [1, deploy.MAX_BATCH], "items": [3, deploy.MAX_ITEMS]}
    assert meta["units"] == {"energy": "kcal/mol", "length": "Angstrom"}
    assert meta["species"] == {"1": 1, "6": 6, "8": 8}


def test_valid_inputs_give_the_eager_numbers(packaged):
    model, pkg = packaged
    pos, species = _frames()
    for got, want in zip(pkg(pos, species), model(pos, species)):
        torch.testing.assert_close(got, want.detach(), rtol=RTOL, atol=ATOL)


def test_non_contiguous_positions_give_the_contiguous_numbers(packaged):
    _, pkg = packaged
    pos, species = _frames()
    padded = torch.zeros(3, 12, 3)
    padded[:, :9] = pos
    view = padded[:, :9]                                  # a view into a padded array: not contiguous
    transposed = pos.transpose(1, 2).contiguous().transpose(1, 2)
    assert not view.is_contiguous() and not transposed.is_contiguous()
    want = pkg(pos, species)
    for x in (view, transposed):
        for got, expected in zip(pkg(x, species), want):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
    wide = torch.stack([species, species], -1)[..., 0]      # int64 with stride (18, 2)
    torch.testing.assert_close(pkg(pos, wide)[0], want[0], rtol=0, atol=0)


def test_int32_species_give_the_int64_numbers(packaged):
    _, pkg = packaged
    pos, species = _frames()
    for got, want in zip(pkg(pos, species.int()), pkg(pos, species)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("case, error, words", [
    ("float64", TypeError, "pos must be torch.float32"),
    ("unbatched pos", ValueError, "add the batch dim: pos[None]"),
    ("unbatched species", ValueError, "species must have shape (B, N)"),
    ("two atoms", ValueError, "number of items (atoms, points) 2 is outside the exported range 3..4096"),
    ("too many molecules", ValueError, "batch size 1025 is outside the exported range 1..1024"),
    ("species out of range", ValueError, "species"),
    ("negative species", ValueError, "species"),
    ("float species", TypeError, "species must hold integers"),
    ("nan", ValueError, "pos"),
    ("mismatched atoms", ValueError, "species has number of items"),
    ("one input", TypeError, "this package takes (pos, species)"),
    ("list", TypeError, "pos must be a torch.Tensor"),
])
def test_bad_inputs_are_refused_in_one_line(packaged, case, error, words):
    _, pkg = packaged
    pos, species = _frames()
    args = {
        "float64": (pos.double(), species),
        "unbatched pos": (pos[0], species),
        "unbatched species": (pos, species[0]),
        "two atoms": _frames(atoms=2),
        "too many molecules": (pos[:1, :3].expand(1025, -1, -1), species[:1, :3].expand(1025, -1)),
        "species out of range": (pos, species + 9),
        "negative species": (pos, species - 9),
        "float species": (pos, species.float()),
        "nan": (pos.clone().index_fill_(0, torch.tensor([1]), float("nan")), species),
        "mismatched atoms": (pos, species[:, :8]),
        "one input": (pos,),
        "list": (pos.tolist(), species),
    }[case]
    with pytest.raises(error) as info:
        pkg(*args)
    message = str(info.value)
    assert words in message and "\n" not in message, message


def test_a_package_cannot_be_cast_or_moved(packaged):
    _, pkg = packaged
    with pytest.raises(TypeError, match="cannot be moved or cast"):
        pkg.double()


@pytest.mark.slow
def test_aoti_package_through_load_and_what_a_bare_call_misses(tmp_path):
    """One AOTInductor compile (~1 min): geomlin.load checks, the raw package reads a view wrongly."""
    model = trained_ethanol_potential()
    pos, species = _frames()
    path = tmp_path / "ethanol.pt2"
    deploy.package(model, path, (pos, species))
    loaded = geomlin.load(path)
    assert isinstance(loaded, PackagedModel) and loaded.card.units.energy == "kcal/mol"
    want = model(pos, species)
    for got, expected in zip(loaded(pos, species), want):
        torch.testing.assert_close(got, expected.detach(), rtol=RTOL, atol=ATOL)
    padded = torch.zeros(3, 12, 3)
    padded[:, :9] = pos
    view = padded[:, :9]
    torch.testing.assert_close(loaded(view, species)[0], loaded(pos, species)[0], rtol=0, atol=0)
    with pytest.raises(TypeError, match="pos must be torch.float32"):
        loaded(pos.double(), species)
    with pytest.raises(ValueError, match="outside the exported range 3..4096"):
        loaded(*_frames(atoms=2))
    transposed = pos.transpose(1, 2).contiguous().transpose(1, 2)   # the same values, other strides
    torch.testing.assert_close(loaded(transposed, species)[0], loaded(pos, species)[0], rtol=0, atol=0)
    raw = torch._inductor.aoti_load_package(str(path))   # bare, AOTI_RUNTIME_CHECK_INPUTS unset
    wrong = raw(transposed, species)[0]                   # read with the contiguous strides: other numbers
    assert not torch.allclose(wrong, want[0].detach(), rtol=RTOL, atol=1.0), (wrong, want[0])
