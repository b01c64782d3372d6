"""Cluster files (TOML): servers with GPUs of a type, CPU cores, DRAM and storage bandwidth.

```toml
name = "synergy-128"
description = "..."

[[servers]]
count = 16          # optional, default 1: this many identical servers
gpu_type = "v100"
gpus = 8
cpus = 24
memory_gb = 500
storage_mbps = 500  # optional
```

`--cluster` takes such a file's path, the name of a bundled one (`shock clusters`), or the
GPU-count forms of `cluster_spec.parse_cluster`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shock.core.errors import InputError
from shock.core.model import Cluster, Server
from shock.engine.cluster_spec import parse_cluster
from shock.util.suggest import did_you_mean

_SERVER_KEYS = {"count", "gpu_type", "gpus", "cpus", "memory_gb", "storage_mbps"}
_TOP_KEYS = {"name", "description", "servers"}
_TOML_POSITION = re.compile(r"at line (\d+)")


@dataclass(frozen=True, slots=True)
class BundledCluster:
    name: str
    path: Path
    cluster: Cluster
    description: str


def bundled_cluster_paths() -> dict[str, Path]:
    folder = resources.files("shock.data").joinpath("clusters")
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    }


def bundled_clusters() -> list[BundledCluster]:
    listed = []
    for name, path in sorted(bundled_cluster_paths().items()):
        cluster, description = _load(path)
        listed.append(BundledCluster(name, path, cluster, description))
    return listed


def cluster_from_option(text: str, gpus_per_server: int | dict[str, int] = 1) -> Cluster:
    """`--cluster`: a bundled cluster name, a `.toml` file, or GPU counts."""
    bundled = bundled_cluster_paths()
    stripped = text.strip()
    if stripped in bundled:
        return load_cluster_file(bundled[stripped])
    if stripped.endswith(".toml") or Path(stripped).is_file():
        return load_cluster_file(stripped)
    if stripped and "=" not in stripped and ":" not in stripped:
        hint = did_you_mean(stripped, bundled)
        raise InputError(
            f"'{stripped}' is no bundled cluster" + (f"; {hint}" if hint else "")
            + f" (bundled: {', '.join(sorted(bundled))}), cluster file (.toml) nor GPU "
            "counts (V100:P100:K80 or v100=32,p100=4)",
            field="--cluster",
        )
    return parse_cluster(text, gpus_per_server)


def load_cluster_file(path: str | Path) -> Cluster:
    return _load(Path(path))[0]


def _load(path: Path) -> tuple[Cluster, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        names = ", ".join(sorted(bundled_cluster_paths()))
        raise InputError(
            f"no such cluster file (bundled clusters: {names})", path=path, field="--cluster"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read cluster file ({exc.strerror})", path=path) from exc
    except UnicodeDecodeError:
        raise InputError("cluster file is not UTF-8 text", path=path) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.search(str(exc))
        line = int(match.group(1)) if match else None
        raise InputError(f"invalid TOML: {exc}", path=path, line=line) from None
    return _cluster_from_toml(raw, text, path)


def _cluster_from_toml(raw: dict[str, object], text: str, path: Path) -> tuple[Cluster, str]:
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        key = unknown[0]
        raise InputError(
            f"unknown key (expected {', '.join(sorted(_TOP_KEYS))})",
            path=path,
            line=_line_of(text, None, key),
            field=key,
        )
    name = raw.get("name", path.stem)
    description = raw.get("description", "")
    if not isinstance(name, str) or not name:
        raise InputError("must be a non-empty string", path=path, field="name")
    if not isinstance(description, str):
        raise InputError("must be a string", path=path, field="description")
    tables = raw.get("servers")
    if not isinstance(tables, list) or not tables:
        raise InputError(
            "a cluster file needs at least one [[servers]] table", path=path, field="servers"
        )
    specs: list[tuple[str, int, float, float, float]] = []
    for index, table in enumerate(tables):
        specs.extend(_server_group(table, index, text, path))
    # Number servers grouped by GPU type (the order GPU ids are given in).
    specs.sort(key=lambda spec: spec[0])
    servers = tuple(
        Server(server_id, gpu_type, gpus, cpus, memory, storage)
        for server_id, (gpu_type, gpus, cpus, memory, storage) in enumerate(specs)
    )
    gpus_per_type: dict[str, int] = {}
    largest: dict[str, int] = {}
    for server in servers:
        kind = server.worker_type
        gpus_per_type[kind] = gpus_per_type.get(kind, 0) + server.num_gpus
        largest[server.worker_type] = max(largest.get(server.worker_type, 0), server.num_gpus)
    cluster = Cluster(
        gpus_per_type=gpus_per_type,
        gpus_per_server=largest,
        explicit_servers=servers,
        name=name,
    )
    return cluster, description


def _server_group(
    table: object, index: int, text: str, path: Path
) -> list[tuple[str, int, float, float, float]]:
    where = f"servers[{index}]"
    if not isinstance(table, dict):
        raise InputError("must be a table", path=path, field=where)
    for key in table:
        if key not in _SERVER_KEYS:
            raise InputError(
                f"unknown key (expected {', '.join(sorted(_SERVER_KEYS))})",
                path=path,
                line=_line_of(text, index, key),
                field=f"{where}.{key}",
            )

    def fail(key: str, message: str) -> InputError:
        return InputError(
            message, path=path, line=_line_of(text, index, key), field=f"{where}.{key}"
        )

    gpu_type = table.get("gpu_type")
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        raise fail("gpu_type", "must be a GPU type name such as \"v100\"")

    def integer(key: str, default: int | None, minimum: int) -> int:
        value = table.get(key, default)
        if value is None:
            raise fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise fail(key, f"must be an integer >= {minimum}, got {value!r}")
        return value

    def amount(key: str, default: float | None) -> float:
        value = table.get(key, default)
        if value is None:
            raise fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise fail(key, f"must be a number > 0, got {value!r}")
        return float(value)

    count = integer("count", 1, 1)
    gpus = integer("gpus", None, 1)
    # A cluster whose simulator models GPUs only may leave out both CPUs and memory (0: not
    # modelled); one without the other is a mistake.
    unmodelled = "cpus" not in table and "memory_gb" not in table
    cpus = 0.0 if unmodelled else amount("cpus", None)
    memory = 0.0 if unmodelled else amount("memory_gb", None)
    storage = amount("storage_mbps", 500.0)
    return [(gpu_type.strip().lower(), gpus, cpus, memory, storage)] * count


def _line_of(text: str, table_index: int | None, key: str) -> int | None:
    """The line of `key` in the top level (None) or in the n-th [[servers]] table; TOML
    parsing keeps no positions, so search the text."""
    lines = text.splitlines()
    start, end = 0, len(lines)
    headers = [i for i, line in enumerate(lines) if line.strip().startswith("[[servers]]")]
    if table_index is None:
        end = headers[0] if headers else end
    elif table_index < len(headers):
        start = headers[table_index]
        end = headers[table_index + 1] if table_index + 1 < len(headers) else end
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number in range(start, end):
        if pattern.match(lines[number]):
            return number + 1
    return start + 1 if table_index is not None else None
