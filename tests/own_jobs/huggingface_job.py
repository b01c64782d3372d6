"""A tiny Hugging Face Trainer run, as a shock job through one callback."""

import time

import torch
from transformers import Trainer, TrainingArguments

from shock.job.huggingface import ShockCallback


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def forward(self, x, labels=None):
        time.sleep(0.05)  # a step long enough that training spans rounds
        out = self.layer(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        return {"x": torch.randn(4, generator=g), "labels": torch.randn(1, generator=g)}


shock = ShockCallback()
args = TrainingArguments(output_dir=shock.output_dir, max_steps=400, per_device_train_batch_size=8,
                         save_strategy="no", report_to=[], logging_strategy="no", use_cpu=True,
                         disable_tqdm=True)
trainer = Trainer(model=Tiny(), args=args, train_dataset=Data(), callbacks=[shock])
trainer.train(resume_from_checkpoint=shock.resume_from)

