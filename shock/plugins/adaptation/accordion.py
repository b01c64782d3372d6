"""Built-in plugin: Accordion, which jumps to the model's largest batch size outside critical
regimes (Shockwave's profile rules, from the bundled adaptation patterns)."""

from __future__ import annotations

from shock.api import JobSpec, Register, ShockError, hookimpl
from shock.plugins.adaptation.patterns import accordion_rules


class AccordionAdaptation:
    name = "accordion"
    description = "Accordion: initial batch size in critical regimes and the first 30%, else max"

    def batch_sizes(self, job: JobSpec, num_epochs: int) -> list[int]:
        initial = job.batch_size
        if initial is None:
            raise ShockError(f"job type '{job.job_type}' has no batch size")
        rules = accordion_rules()
        model = job.model_family
        largest = rules.max_batch_size.get(model)
        if model in rules.non_adaptive_models or largest is None:
            return [initial] * num_epochs
        regimes = rules.regimes(model, initial)
        # The warm-up rule e <= 0.3 n, in integers (10 e <= 3 n) to match the source exactly:
        # epochs 0 .. floor(3 n / 10).
        numerator = round(rules.warmup_fraction * 10)
        warming_up = max(0, min(num_epochs, numerator * num_epochs // 10 + 1))
        sizes = [initial] * warming_up + [largest] * (num_epochs - warming_up)
        # Critical regimes keep the initial size (slices: this runs for every epoch of jobs
        # with thousands of epochs).
        for start, end in regimes:
            first, stop = max(start, 0), min(end, num_epochs)
            if first < stop:
                sizes[first:stop] = [initial] * (stop - first)
        return sizes


@hookimpl
def register_adaptations(register: Register) -> None:
    register(AccordionAdaptation())
