"""Cluster files (TOML), bundled clusters and `--cluster` resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shock.cli.app import app
from shock.core.errors import InputError
from shock.engine.cluster_file import bundled_clusters, cluster_from_option, load_cluster_file

GOOD = """name = "tiny"
description = "two types"

[[servers]]
count = 2
gpu_type = "V100"
gpus = 4
cpus = 12
memory_gb = 250

[[servers]]
gpu_type = "k80"
gpus = 2
cpus = 8
memory_gb = 100
storage_mbps = 300
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path


def test_synergy_128_is_bundled_by_name() -> None:
    cluster = cluster_from_option("synergy-128")
    servers = cluster.servers()
    assert len(servers) == 16
    assert cluster.total_gpus == 128
    assert {(s.num_gpus, s.cpus, s.memory_gb, s.storage_mbps) for s in servers} == {
        (8, 24.0, 500.0, 500.0)
    }
    assert cluster.has_server_resources
    assert cluster.describe() == "synergy-128 (v100=128)"
    assert "synergy-128" in {b.name for b in bundled_clusters()}


def test_file_with_two_types(tmp_path: Path) -> None:
    cluster = cluster_from_option(str(write(tmp_path, GOOD)))
    assert cluster.gpus_per_type == {"k80": 2, "v100": 8}
    servers = cluster.servers()
    # Grouped by type, ids in that order (GPU ids are contiguous per server).
    assert [(s.server_id, s.worker_type, s.num_gpus) for s in servers] == [
        (0, "k80", 2),
        (1, "v100", 4),
        (2, "v100", 4),
    ]
    assert servers[0].storage_mbps == 300.0
    assert servers[1].storage_mbps == 500.0  # default


def test_gpu_count_forms_still_work() -> None:
    assert cluster_from_option("32:0:0").total_gpus == 32
    assert not cluster_from_option("v100=8", 8).has_server_resources


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (GOOD.replace("cpus = 12", "cpus = -1"), 8, "servers[0].cpus", "> 0"),
        (GOOD.replace("gpus = 2", "gpus = 1.5"), 13, "servers[1].gpus", "integer"),
        (GOOD.replace("memory_gb = 100\n", ""), 11, "servers[1].memory_gb", "required"),
        (GOOD.replace("count = 2", "cont = 2"), 5, "servers[0].cont", "unknown key"),
        (GOOD.replace('gpu_type = "k80"', "gpu_type = 3"), 12, "servers[1].gpu_type", "GPU type"),
        ('name = "x"\n', None, "servers", "[[servers]]"),
    ],
)
def test_bad_files_name_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_cluster_file(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line
    assert caught.value.field == field
    assert words in caught.value.reason


def test_toml_syntax_error_has_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("cpus = 8", "cpus = = 8"))
    with pytest.raises(InputError) as caught:
        load_cluster_file(path)
    assert caught.value.line == 14


def test_missing_file_or_unknown_name_lists_bundled(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="synergy-128"):
        cluster_from_option(str(tmp_path / "nope.toml"))
    with pytest.raises(
        InputError, match=r"no bundled cluster; did you mean 'synergy-128'.*\(bundled: .*hetero-96"
    ):
        cluster_from_option("synergy-256")
    with pytest.raises(InputError, match=r"'zzz' is no bundled cluster \(bundled: hetero-96"):
        cluster_from_option("zzz")


def test_clusters_command_lists_bundled() -> None:
    result = CliRunner().invoke(app, ["clusters"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "synergy-128" in result.output
    assert "384" in result.output  # 16 x 24 CPUs
