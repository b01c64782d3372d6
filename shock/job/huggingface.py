"""Hugging Face `transformers.Trainer`: a callback that runs a training as a shock job
(`pip install "shock[huggingface]"`).

    from shock.job.huggingface import ShockCallback
    shock = ShockCallback()
    args = TrainingArguments(output_dir=shock.output_dir, max_steps=2000, ...)
    trainer = Trainer(model=model, args=args, ..., callbacks=[shock])
    trainer.train(resume_from_checkpoint=shock.resume_from)

It reports progress every second, and at the next step after a preemption or the end of
its lease it has the Trainer save a checkpoint and stop; it also asks for a save whenever a
periodic checkpoint is due. The Trainer's checkpoints (`checkpoint-<step>` folders) live in
`output_dir`, the job's checkpoint directory by default, and `resume_from` is the newest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from shock.job.session import Session, session


class ShockCallback(TrainerCallback):
    def __init__(self, job_session: Session | None = None, output_dir: str | None = None) -> None:
        self.session = job_session or session()
        self.output_dir = output_dir or str(self.session.checkpoint_dir)
        folder = Path(self.output_dir)
        self.resume_from: str | None = get_last_checkpoint(str(folder)) if folder.is_dir() else None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.session.begin(state.max_steps, state.global_step)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        current = self.session
        current.advance_to(state.global_step)
        if current.should_stop():
            control.should_save = True
            control.should_training_stop = True
        elif current.checkpoint_due():
            control.should_save = True

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        folder = Path(args.output_dir or self.output_dir) / f"checkpoint-{state.global_step}"
        self.session.checkpoint_written(folder)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        current = self.session
        current.advance_to(state.global_step)
        current.report()
        current.close()
