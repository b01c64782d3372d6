"""Parse `--cluster`: Gavel's `V:P:K` form (`32:0:0`) or `v100=32,p100=4`.

The colon form counts GPUs of the bundled Gavel table's worker types, fastest first (V100,
P100, K80), as Gavel's scripts write clusters.
"""

from __future__ import annotations

from shock.core.errors import InputError
from shock.core.model import Cluster


def parse_cluster(text: str, gpus_per_server: int | dict[str, int] = 1) -> Cluster:
    text = text.strip()
    if not text:
        raise InputError("empty cluster specification", field="--cluster")
    counts = _parse_colon_form(text) if "=" not in text else _parse_named_form(text)
    if sum(counts.values()) == 0:
        raise InputError(f"cluster '{text}' has no GPUs", field="--cluster")
    if isinstance(gpus_per_server, int):
        per_server = dict.fromkeys(counts, gpus_per_server)
    else:
        per_server = {w: gpus_per_server.get(w, 1) for w in counts}
    for worker_type, size in per_server.items():
        if size < 1:
            raise InputError(
                f"GPUs per server for {worker_type} must be >= 1, got {size}",
                field="--gpus-per-server",
            )
    return Cluster(gpus_per_type=counts, gpus_per_server=per_server)


def parse_prices(text: str) -> dict[str, float]:
    """`--prices v100=2.48,p100=1.46,k80=0.45`: price of one GPU-hour of each worker type."""
    prices: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not sep or not name or not price > 0:
            raise InputError(
                f"'{item}' is not of the form type=price with price > 0", field="--prices"
            )
        prices[name] = price
    return prices


# The bundled Gavel table's worker types, fastest first (`fastest_first()` of that table, as a
# test checks): named here so that parsing a cluster does not load the 1.2 MB table.
COLON_FORM_ORDER = ("v100", "p100", "k80")


def _parse_colon_form(text: str) -> dict[str, int]:
    order = COLON_FORM_ORDER
    parts = text.split(":")
    if len(parts) != len(order):
        form = ":".join(w.upper() for w in order)
        example = f"{order[0]}=32,{order[1]}=4" if len(order) > 1 else f"{order[0]}=32"
        raise InputError(
            f"'{text}' is not of the form {form} (e.g. 32{':0' * (len(order) - 1)}) "
            f"nor {example}",
            field="--cluster",
        )
    return {w: _count(p, w, text) for w, p in zip(order, parts, strict=True)}


def _parse_named_form(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise InputError(f"'{item}' is not of the form type=count", field="--cluster")
        if name in counts:
            raise InputError(f"worker type '{name}' given twice", field="--cluster")
        counts[name] = _count(value, name, text)
    return counts


def _count(value: str, worker_type: str, text: str) -> int:
    try:
        count = int(value.strip())
    except ValueError:
        raise InputError(
            f"GPU count for {worker_type} in '{text}' is not an integer: {value!r}",
            field="--cluster",
        ) from None
    if count < 0:
        raise InputError(f"GPU count for {worker_type} must be >= 0", field="--cluster")
    return count
