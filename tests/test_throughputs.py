"""Throughput tables: job keys, the bundled Gavel table, loading errors, dict round trip."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import pytest

from shock.core.errors import InputError
from shock.core.throughputs import (
    ThroughputTable,
    default_throughputs,
    format_job_key,
    load_throughputs,
    parse_job_key,
    throughputs_from_dict,
    throughputs_to_dict,
)

BUNDLED_JSON = Path(str(resources.files("shock.data").joinpath("gavel_throughputs.json")))
WORKER_TYPES = (
    "k80",
    "k80_unconsolidated",
    "p100",
    "p100_unconsolidated",
    "v100",
    "v100_unconsolidated",
)


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(BUNDLED_JSON.read_text())


# --------------------------------------------------------------------------- job keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("('ResNet-18 (batch size 32)', 1)", ("ResNet-18 (batch size 32)", 1)),
        ("('A3C', 8)", ("A3C", 8)),
        ('("LM (batch size 5)", 4)', ("LM (batch size 5)", 4)),
        ("('CycleGAN', 2)", ("CycleGAN", 2)),
    ],
)
def test_parse_job_key_good(text: str, expected: tuple[str, int]) -> None:
    assert parse_job_key(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ResNet-18",
        "null",
        "('A3C',)",
        "('A3C', 1, 2)",
        "(1, 'A3C')",
        "('A3C', '1')",
        "('A3C', 1.0)",
        "['A3C', 1]",
        "('A3C', 1",
        "__import__('os')",
    ],
)
def test_parse_job_key_bad(text: str) -> None:
    with pytest.raises(ValueError, match="not a \\(job type, scale factor\\) key"):
        parse_job_key(text)


@pytest.mark.parametrize("text", ["('A3C', True)", "('A3C', 0)", "('A3C', -2)"])
def test_parse_job_key_rejects_non_scale_factors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_job_key(text)


def test_format_job_key_matches_gavel_spelling(raw: dict) -> None:
    for key_text in raw["v100"]:
        assert format_job_key(parse_job_key(key_text)) == key_text


def test_format_job_key_round_trips_quotes() -> None:
    key = ("it's", 1)
    assert parse_job_key(format_job_key(key)) == key


# --------------------------------------------------------------------------- bundled table


def test_default_table_shape(raw: dict) -> None:
    table = default_throughputs()
    assert len(table.isolated) == 83
    assert table.worker_types == WORKER_TYPES
    assert set(raw) == set(WORKER_TYPES)
    job_types = {job_type for job_type, _ in table.isolated}
    assert len(job_types) == 26
    assert {sf for _, sf in table.isolated} == {1, 2, 4, 8}
    # Every key of the file is present, for every worker type it appears under.
    for worker_type, jobs in raw.items():
        for key_text in jobs:
            assert worker_type in table.isolated[parse_job_key(key_text)]


def test_default_table_is_cached_and_named() -> None:
    assert default_throughputs() is default_throughputs()
    assert "bundled" in default_throughputs().source


@pytest.mark.parametrize(
    ("job_type", "sf", "worker_type"),
    [
        ("ResNet-18 (batch size 32)", 1, "v100"),
        ("ResNet-18 (batch size 32)", 1, "k80"),
        ("ResNet-50 (batch size 64)", 8, "p100"),
        ("Transformer (batch size 128)", 4, "v100_unconsolidated"),
        ("A3C", 1, "k80"),
        ("Recommendation (batch size 8192)", 1, "p100"),
    ],
)
def test_default_table_values_match_json(
    raw: dict, job_type: str, sf: int, worker_type: str
) -> None:
    expected = raw[worker_type][f"('{job_type}', {sf})"]["null"]
    assert default_throughputs().throughput(job_type, sf, worker_type) == expected
    assert expected > 0


def test_resnet18_bs32_v100_value(raw: dict) -> None:
    value = default_throughputs().throughput("ResNet-18 (batch size 32)", 1, "v100")
    assert value == raw["v100"]["('ResNet-18 (batch size 32)', 1)"]["null"]
    assert value == pytest.approx(29.947157347732464)


def test_pair_throughput_matches_json(raw: dict) -> None:
    first = ("ResNet-18 (batch size 16)", 1)
    second = ("ResNet-18 (batch size 32)", 1)
    expected = raw["k80"]["('ResNet-18 (batch size 16)', 1)"]["('ResNet-18 (batch size 32)', 1)"]
    assert default_throughputs().pair_throughput(first, second, "k80") == tuple(expected)


def test_missing_entries_are_zero() -> None:
    table = default_throughputs()
    assert table.throughput("A3C", 8, "v100") == 0.0  # A3C is not distributed
    assert table.throughput("ResNet-18 (batch size 32)", 1, "a100") == 0.0
    assert table.pair_throughput(("A3C", 1), ("Nope", 1), "v100") == (0.0, 0.0)
    assert not table.has("A3C", 8)
    assert table.has("A3C", 1)


def test_k80_unconsolidated_lacks_some_keys(raw: dict) -> None:
    assert len(raw["k80_unconsolidated"]) == 77
    table = default_throughputs()
    missing = [
        key for key, per_type in table.isolated.items() if "k80_unconsolidated" not in per_type
    ]
    assert len(missing) == 83 - 77


def test_set_adds_value() -> None:
    table = ThroughputTable()
    table.set("A3C", 1, "v100", 2.5)
    assert table.throughput("A3C", 1, "v100") == 2.5
    assert table.worker_types == ("v100",)


# --------------------------------------------------------------------------- round trip


def test_dict_round_trip_on_bundled_file(raw: dict) -> None:
    table = throughputs_from_dict(raw)
    assert len(table.pairs) > 0
    assert throughputs_to_dict(table) == raw


def test_dict_round_trip_keeps_pairs_only_where_measured() -> None:
    raw = {
        "v100": {
            "('A', 1)": {"null": 1.0, "('B', 1)": [0.5, 0.25]},
            "('B', 1)": {"null": 2.0},
        },
        "k80": {"('A', 1)": {"null": 0.0}},
    }
    table = throughputs_from_dict(copy.deepcopy(raw))
    assert table.pair_throughput(("A", 1), ("B", 1), "v100") == (0.5, 0.25)
    assert table.pair_throughput(("B", 1), ("A", 1), "v100") == (0.0, 0.0)
    assert throughputs_to_dict(table) == raw


# --------------------------------------------------------------------------- loading errors


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "throughputs.json"
    path.write_text(text)
    return path


def test_load_valid_file(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps({"v100": {"('A', 1)": {"null": 3}}}))
    table = load_throughputs(path)
    assert table.throughput("A", 1, "v100") == 3.0
    assert isinstance(table.throughput("A", 1, "v100"), float)
    assert table.source == str(path)


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '{\n  "v100": {\n    "(\'A\', 1)": {"null": 1.0,}\n  }\n}\n')
    with pytest.raises(InputError) as info:
        load_throughputs(path)
    assert info.value.line == 3
    assert f"{path}:3" in str(info.value)
    assert "invalid JSON" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(InputError) as info:
        load_throughputs(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ({"v100": {"('A', 1)": {"null": -1.0}}}, "v100.('A', 1).null", ">= 0"),
        ({"v100": {"('A', 1)": {"null": "fast"}}}, "v100.('A', 1).null", "number"),
        ({"v100": {"('A', 1)": {"null": True}}}, "v100.('A', 1).null", "number"),
        ({"v100": {"('A', 1)": {"('B', 1)": [1, 2]}}}, "v100.('A', 1)", "'null'"),
        ({"v100": {"('A', 1)": 4.0}}, "v100.('A', 1)", "'null'"),
        ({"v100": {"A": {"null": 1.0}}}, "v100.A", "key"),
        ({"v100": [1, 2]}, "v100", "object"),
        (
            {"v100": {"('A', 1)": {"null": 1.0, "('B', 1)": [1.0]}}},
            "v100.('A', 1).('B', 1)",
            "[a, b]",
        ),
        (
            {"v100": {"('A', 1)": {"null": 1.0, "('B', 1)": [1.0, -2.0]}}},
            "v100.('A', 1).('B', 1)[1]",
            ">= 0",
        ),
        ({"v100": {"('A', 1)": {"null": 1.0, "B": [1.0, 2.0]}}}, "v100.('A', 1).B", "key"),
    ],
)
def test_bad_value_names_file_and_field(
    tmp_path: Path, document: dict, field: str, words: str
) -> None:
    path = _write(tmp_path, json.dumps(document))
    with pytest.raises(InputError) as info:
        load_throughputs(path)
    assert info.value.field == field
    assert str(path) in str(info.value)
    assert f"field '{field}'" in str(info.value)
    assert words in str(info.value)


def test_top_level_not_object(tmp_path: Path) -> None:
    path = _write(tmp_path, "[1, 2]")
    with pytest.raises(InputError) as info:
        load_throughputs(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("constant", ["NaN", "Infinity"])
def test_non_finite_throughput_rejected(tmp_path: Path, constant: str) -> None:
    path = _write(tmp_path, '{"v100": {"(\'A\', 1)": {"null": ' + constant + "}}}")
    with pytest.raises(InputError):
        load_throughputs(path)


def test_non_utf8_file_is_input_error(tmp_path: Path) -> None:
    path = tmp_path / "throughputs.json"
    path.write_bytes(b'{"v100": {"\xff": 1}}')
    with pytest.raises(InputError):
        load_throughputs(path)
