"""Gavel's 26 job templates (bundled data) and the launch commands they imply."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

# The order in which each family's command places its parts, as in Gavel's job table.
_COMMAND_ORDER = {
    "ResNet-50": ("other", "batch_size", "data"),
    "LM": ("other", "data", "batch_size"),
    "CycleGAN": ("data", "other"),
    "A3C": ("other",),
}
_DEFAULT_ORDER = ("data", "batch_size", "other")


@dataclass(frozen=True, slots=True)
class JobTemplate:
    job_type: str
    model_family: str
    batch_size: int | None
    distributed: bool
    allowed_scale_factors: tuple[int, ...]
    working_directory: str
    num_steps_arg: str
    needs_data_dir: bool
    interpreter: str
    entry_script: str
    batch_size_flag: str | None
    data_argument: str | None
    other_flags: tuple[str, ...]
    in_shockwave_job_table: bool

    def command(self) -> str:
        """The trace's command column, with `%s` where the data directory goes."""
        parts = {
            "other": list(self.other_flags),
            "batch_size": [f"{self.batch_size_flag} {self.batch_size}"]
            if self.batch_size_flag
            else [],
            "data": [_data_argument(self.data_argument)] if self.data_argument else [],
        }
        tokens = [self.interpreter, self.entry_script]
        for part in _COMMAND_ORDER.get(self.model_family, _DEFAULT_ORDER):
            tokens.extend(parts[part])
        return " ".join(tokens)

    def shockwave_command(self) -> str:
        """The command as Shockwave's job table writes it: `python3` for LM and `-j 4` data
        loader workers for ResNet-50 (data README, `shockwave_job_table_differences`)."""
        command = self.command()
        if self.model_family == "LM" and command.startswith("python "):
            command = "python3 " + command.removeprefix("python ")
        if self.model_family == "ResNet-50":
            command = command.replace("-j 8", "-j 4", 1)
        return command


def _data_argument(shape: str) -> str:
    # ResNet-50's shape is described in words: a positional <data_dir>/imagenet/ argument.
    if shape.startswith("positional argument "):
        shape = shape.removeprefix("positional argument ").split(" ", 1)[0]
    return shape.replace("<data_dir>", "%s")


@cache
def gavel_templates() -> tuple[JobTemplate, ...]:
    raw = json.loads(resources.files("shock.data").joinpath("gavel_job_templates.json").read_text())
    templates = []
    for entry in raw["templates"]:
        shape = entry["command_shape"]
        templates.append(
            JobTemplate(
                job_type=entry["job_type"],
                model_family=entry["model_family"],
                batch_size=entry["batch_size"],
                distributed=entry["distributed"],
                allowed_scale_factors=tuple(entry["allowed_scale_factors"]),
                working_directory=entry["working_directory"],
                num_steps_arg=entry["num_steps_arg"],
                needs_data_dir=entry["needs_data_dir"],
                interpreter=shape["interpreter"],
                entry_script=shape["entry_script"],
                batch_size_flag=shape["batch_size_flag"],
                data_argument=shape["data_argument"],
                other_flags=tuple(shape["other_flags"]),
                in_shockwave_job_table=entry["in_shockwave_job_table"],
            )
        )
    return tuple(templates)
