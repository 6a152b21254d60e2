"""The ``geomlin`` command in a process that has the simulated accelerator and its NCCL-like process group.

``torchrun --nproc_per_node=2 tests/train/sim_launcher.py train pointcloud --quick --device sim`` runs
``geomlin train`` in every rank exactly as ``python -m geomlin`` would, except that the ``sim``
device (:mod:`tests.device.simulated`: CUDA's device rules) and the ``simccl`` backend
(:mod:`tests.device.process_group`: refuses CPU tensors, as NCCL does) are registered first, so
``--device sim`` picks ``simccl`` through ``torch.distributed.get_default_backend_for_device``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.device import process_group, simulated  # noqa: F401  (registers the sim device)

process_group.register()

from geomlin.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
