"""strata for PyTorch jobs (docs/pytorch.md): DCP storage on strata's
checkpoint engine (StorageWriter, StorageReader) and a step monitor with
sections (monitor, step). Needs torch >= 2.3."""
from strata.torch.monitor import (StepMonitor, current, monitor,
                                  set_total_steps, step)
from strata.torch._staging import wait_for_staging
from strata.torch.storage import StorageReader, StorageWriter

__all__ = ["StepMonitor", "StorageReader", "StorageWriter", "current",
           "monitor", "set_total_steps", "step", "wait_for_staging"]
