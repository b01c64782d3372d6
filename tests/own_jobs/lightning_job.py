"""A tiny Lightning fit, run as a shock job through one callback."""

import time

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from shock.job.lightning import ShockCallback


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        time.sleep(0.05)  # a step long enough that training spans rounds
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
shock = ShockCallback()
trainer = pl.Trainer(max_steps=400, callbacks=[shock], logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(Tiny(), data, ckpt_path=shock.resume_from)

