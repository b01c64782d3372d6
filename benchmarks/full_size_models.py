"""The full-size reference models on a device, each beside Gavel's V100 measurement.

For each family, one job type (Gavel's batch size given below) is trained for `--seconds`
after warm-up steps with `--workload-size full`, and its steps/s is printed next to the V100
figure of Gavel's bundled table and their ratio (a current GPU should beat a V100 on every
family). Optionally also the launch, checkpoint and restore costs (`--start-costs`).

    python benchmarks/full_size_models.py --device cuda:0 [--seconds 10] [--start-costs]
    python benchmarks/full_size_models.py --device cpu --families A3C,LM --seconds 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shock.core.throughputs import default_throughputs

JOB_TYPES = {
    "ResNet-18": "ResNet-18 (batch size 128)",
    "ResNet-50": "ResNet-50 (batch size 64)",
    "Transformer": "Transformer (batch size 64)",
    "LM": "LM (batch size 20)",
    "Recommendation": "Recommendation (batch size 2048)",
    "CycleGAN": "CycleGAN",
    "A3C": "A3C",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--families", help="comma-separated (default: all seven)")
    parser.add_argument("--start-costs", action="store_true", help="also launch/checkpoint")
    args = parser.parse_args()

    import torch

    from shock.workloads.profile import measure_throughput
    from shock.workloads.start_costs import measure_start_costs

    torch.backends.cudnn.benchmark = True
    families = args.families.split(",") if args.families else list(JOB_TYPES)
    gavel = default_throughputs()
    table = Table(title=f"full-size models on {args.device} against Gavel's V100")
    columns = ["job type", "steps/s", "Gavel V100 steps/s", "ratio"]
    if args.start_costs:
        columns += ["launch s", "checkpoint s", "restore s"]
    for column in columns:
        table.add_column(column, justify="left" if column == "job type" else "right")
    for family in families:
        job_type = JOB_TYPES[family]
        result = measure_throughput(
            job_type, args.device, args.seconds, args.warmup_steps, size="full"
        )
        v100 = gavel.throughput(job_type, 1, "v100")
        row = [job_type, f"{result.steps_per_s:.2f}", f"{v100:.2f}",
               f"{result.steps_per_s / v100:.2f}" if v100 else "-"]  # fmt: skip
        if args.start_costs:
            costs = measure_start_costs(job_type, args.device, "full")
            row += [f"{costs.launch_s:.2f}", f"{costs.checkpoint_s:.3f}", f"{costs.restore_s:.3f}"]
        table.add_row(*row)
        Console().print(f"{job_type}: {result.steps_per_s:.2f} steps/s", highlight=False)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
