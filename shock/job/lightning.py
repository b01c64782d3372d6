"""PyTorch Lightning: a callback that runs a `Trainer` as a shock job (`pip install
"shock[lightning]"`).

    from shock.job.lightning import ShockCallback
    shock = ShockCallback()
    trainer = lightning.Trainer(max_steps=2000, callbacks=[shock])
    trainer.fit(model, data, ckpt_path=shock.resume_from)

It reports progress every second, stops the fit at the next step when the job is preempted
or its lease runs out, and saves Lightning's own checkpoints (atomically, in the job's
checkpoint directory) when one is due and when the fit stops; `resume_from` is the newest
of them (None before the first), so a relaunched job goes on from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from shock.job.checkpoint import latest_checkpoint_path, write_file_atomically
from shock.job.session import Session, session


class ShockCallback(pl.Callback):
    def __init__(self, job_session: Session | None = None) -> None:
        self.session = job_session or session()
        self.resume_from: str | None = None
        found = latest_checkpoint_path(self.session.checkpoint_dir)
        if found is not None:
            self.resume_from = str(found)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        total = trainer.max_steps if trainer.max_steps > 0 else trainer.global_step
        self.session.begin(total, trainer.global_step)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
        batch_idx: int,
    ) -> None:  # fmt: skip
        current = self.session
        current.advance_to(trainer.global_step)
        if current.should_stop():
            self._save(trainer)
            trainer.should_stop = True
        elif current.checkpoint_due():
            self._save(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        current = self.session
        current.advance_to(trainer.global_step)
        if current.control.last_checkpoint_step != current.step:
            self._save(trainer)
        current.report()
        current.close()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.session.fail(f"{type(exception).__name__}: {exception}")

    def _save(self, trainer: pl.Trainer) -> None:
        """Lightning's checkpoint (model, optimizers, loops) of this step, written whole."""
        current = self.session
        if current.is_lead:
            path = write_file_atomically(
                current.checkpoint_dir, current.step,
                lambda temporary: trainer.save_checkpoint(temporary),
            )  # fmt: skip
            current.checkpoint_written(Path(path))
        else:
            trainer.save_checkpoint(current.checkpoint_dir / ".rank-unused.ckpt")
