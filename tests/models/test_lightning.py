"""Force models under PyTorch Lightning (issue 31): ``validate()`` / ``test()`` run under
``torch.inference_mode`` by default, where forces by autograd cannot be computed; geomlin refuses at
once with a message naming ``inference_mode=False``, and with that flag both work.

Oracle: the same validation step run by hand outside Lightning (its force MAE).
"""

import pytest
import torch

from geomlin.models import EnergyAndForces, GauntPotential, MoleculeEnergyModel
from tests.oracles import require

L = require("lightning")


def _data():
    g = torch.Generator().manual_seed(0)
    pos = 1.5 * torch.randn(8, 5, 3, generator=g)
    species = torch.randint(0, 3, (8, 5), generator=g)
    forces = torch.randn(8, 5, 3, generator=g)
    return torch.utils.data.TensorDataset(pos, species, forces)


class ForceModule(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = MoleculeEnergyModel(GauntPotential(num_species=3, hidden_channels=8, lmax=1, num_blocks=1))

    def _mae(self, batch):
        pos, species, forces = batch
        _, predicted = self.model(pos, species)
        return (predicted - forces).abs().mean()

    def training_step(self, batch, _):
        return self._mae(batch)

    def validation_step(self, batch, _):
        self.log("val_mae", self._mae(batch))

    def test_step(self, batch, _):
        self.log("test_mae", self._mae(batch))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def _trainer(**kwargs):
    return L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, max_epochs=1, **kwargs)


def _loader():
    return torch.utils.data.DataLoader(_data(), batch_size=4)


def test_default_validate_and_test_refuse_in_one_line_naming_the_flag():
    module = ForceModule()
    for run in (_trainer().validate, _trainer().test):
        with pytest.raises(RuntimeError, match=r"Trainer\(inference_mode=False\)") as info:
            run(module, _loader())
        assert "\n" not in str(info.value)


def test_with_inference_mode_off_validate_and_test_give_the_hand_computed_mae():
    module = ForceModule()
    _trainer(inference_mode=False).fit(module, _loader())
    (validated,) = _trainer(inference_mode=False).validate(module, _loader())
    (tested,) = _trainer(inference_mode=False).test(module, _loader())
    module.eval()
    want = torch.stack([module._mae(b).detach() for b in _loader()]).mean()
    assert validated["val_mae"] == pytest.approx(float(want), rel=1e-5)
    assert tested["test_mae"] == pytest.approx(float(want), rel=1e-5)


def test_energy_and_forces_refuses_under_inference_mode():
    step = EnergyAndForces(GauntPotential(num_species=3, hidden_channels=8, lmax=1, num_blocks=1), backend=None)
    pos, species, _ = _data()[:2]
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode=False"):
        step(pos, species)
