"""`--cluster` parsing and grouping GPUs into servers."""

from __future__ import annotations

import pytest

from shock.core.errors import InputError
from shock.core.model import Cluster, Server
from shock.core.throughputs import default_throughputs
from shock.engine.cluster_spec import COLON_FORM_ORDER, parse_cluster


def test_colon_form() -> None:
    cluster = parse_cluster("32:0:0")
    assert cluster.gpus_per_type == {"v100": 32, "p100": 0, "k80": 0}
    assert cluster.worker_types == ("v100",)
    assert cluster.total_gpus == 32
    assert cluster.describe() == "v100=32"


def test_colon_form_counts_the_bundled_tables_types_fastest_first() -> None:
    assert default_throughputs().fastest_first() == COLON_FORM_ORDER


def test_colon_form_all_types() -> None:
    cluster = parse_cluster(" 8:16:24 ")
    assert cluster.gpus_per_type == {"v100": 8, "p100": 16, "k80": 24}
    # Sorted by name, as Gavel orders worker types.
    assert cluster.worker_types == ("k80", "p100", "v100")
    assert cluster.total_gpus == 48
    assert cluster.describe() == "k80=24,p100=16,v100=8"


def test_named_form() -> None:
    cluster = parse_cluster("v100=32,p100=4")
    assert cluster.gpus_per_type == {"v100": 32, "p100": 4}
    assert cluster.worker_types == ("p100", "v100")
    assert cluster.total_gpus == 36


def test_named_form_normalises_names_and_spaces() -> None:
    cluster = parse_cluster("V100 = 2, k80=0")
    assert cluster.gpus_per_type == {"v100": 2, "k80": 0}
    assert cluster.worker_types == ("v100",)


def test_default_one_gpu_per_server() -> None:
    servers = parse_cluster("2:1:0").servers()
    assert servers == [
        Server(0, "p100", 1),
        Server(1, "v100", 1),
        Server(2, "v100", 1),
    ]


def test_servers_group_gpus() -> None:
    cluster = parse_cluster("v100=10,k80=8", gpus_per_server=4)
    assert cluster.gpus_per_server == {"v100": 4, "k80": 4}
    servers = cluster.servers()
    assert [(s.server_id, s.worker_type, s.num_gpus) for s in servers] == [
        (0, "k80", 4),
        (1, "k80", 4),
        (2, "v100", 4),
        (3, "v100", 4),
        (4, "v100", 2),  # the remainder forms a smaller last server
    ]
    assert sum(s.num_gpus for s in servers) == cluster.total_gpus


def test_servers_per_type_mapping() -> None:
    cluster = parse_cluster("v100=16,p100=3", gpus_per_server={"v100": 8})
    assert cluster.gpus_per_server == {"v100": 8, "p100": 1}
    sizes = [(s.worker_type, s.num_gpus) for s in cluster.servers()]
    assert sizes == [("p100", 1)] * 3 + [("v100", 8)] * 2


def test_servers_skip_types_without_gpus() -> None:
    servers = parse_cluster("32:0:0", gpus_per_server=8).servers()
    assert [s.worker_type for s in servers] == ["v100"] * 4
    assert [s.server_id for s in servers] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1:2", "V100:P100:K80"),
        ("1:2:3:4", "V100:P100:K80"),
        ("v100=x", "not an integer"),
        ("v100=1.5", "not an integer"),
        ("v100=1,v100=2", "given twice"),
        ("v100=1,V100=2", "given twice"),
        ("0:0:0", "no GPUs"),
        ("v100=0", "no GPUs"),
        ("-1:0:0", ">= 0"),
        ("v100=-4,p100=8", ">= 0"),
        ("", "empty"),
        ("   ", "empty"),
        ("v100", "V100:P100:K80"),
        ("v100=2,", "type=count"),
        ("=4", "type=count"),
        ("a:b:c", "not an integer"),
    ],
)
def test_bad_cluster(text: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse_cluster(text)
    assert info.value.field == "--cluster"
    assert "--cluster" in str(info.value)
    assert words in str(info.value)


def test_cluster_rejects_negative_counts_directly() -> None:
    with pytest.raises(ValueError, match="negative"):
        Cluster({"v100": -1})


@pytest.mark.parametrize("per_server", [0, -1])
def test_bad_gpus_per_server_is_input_error(per_server: int) -> None:
    with pytest.raises(InputError):
        parse_cluster("v100=4", gpus_per_server=per_server)
