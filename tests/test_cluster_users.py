"""Users files (`shock serve --users`): TOML and CSV, tokens by hash, clear errors; and the
service's access rule: workers use the cluster token, users their own."""

from __future__ import annotations

import hashlib
from pathlib import Path

import grpc
import pytest

from shock.cluster.auth import TokenInterceptor, token_metadata
from shock.cluster.users import DEFAULT_ADMIN, hash_token, load_users, single_admin
from shock.core.errors import InputError


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


TOML = f"""
[[user]]
name = "alice"
weight = 2.5
token_sha256 = "{digest("a-token")}"

[[user]]
name = "root"
token_sha256 = "{digest("r-token").upper()}"
admin = true
"""


def test_a_toml_users_file_gives_names_weights_admins_and_finds_users_by_token(
    tmp_path: Path,
) -> None:
    path = tmp_path / "users.toml"
    path.write_text(TOML)
    users = load_users(path)
    assert users.weights() == {"alice": 2.5, "root": 1.0}
    alice = users.identify("a-token")
    root = users.identify("r-token")
    assert alice is not None and (alice.name, alice.admin) == ("alice", False)
    assert root is not None and (root.name, root.admin) == ("root", True)
    assert users.identify("wrong") is None and users.identify("") is None
    assert not users.open_names


def test_a_csv_users_file_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text(
        "name,weight,token_sha256,admin\n"
        f"alice,2.5,{digest('a-token')},false\n"
        "# a comment line\n"
        f"root,1,{digest('r-token')},TRUE\n"
    )
    users = load_users(path)
    assert users.weights() == {"alice": 2.5, "root": 1.0}
    root = users.identify("r-token")
    assert root is not None and root.admin


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        ("name,weight,token_sha256\n", "users.csv:1", "header"),
        (f"name,weight,token_sha256,admin\nbob,0,{digest('b')},false\n",
         "users.csv:2, field 'weight'", "> 0"),
        ("name,weight,token_sha256,admin\nbob,1,abc,false\n",
         "users.csv:2, field 'token_sha256'", "64 hex"),
        (f"name,weight,token_sha256,admin\nbob,1,{digest('b')},maybe\n",
         "users.csv:2, field 'admin'", "true or false"),
        (f"name,weight,token_sha256,admin\nbob,1,{digest('b')}\n", "users.csv:2", "3 fields"),
        (f"name,weight,token_sha256,admin\nb b,1,{digest('b')},false\n",
         "users.csv:2, field 'name'", "user name"),
        (f"name,weight,token_sha256,admin\nbob,1,{digest('b')},false\n"
         f"bob,1,{digest('c')},false\n", "users.csv", "twice"),
        (f"name,weight,token_sha256,admin\nbob,1,{digest('b')},false\n"
         f"eve,1,{digest('b')},false\n", "users.csv", "same token"),
    ],
)  # fmt: skip
def test_a_bad_csv_line_is_named_with_its_field(
    tmp_path: Path, text: str, where: str, why: str
) -> None:
    path = tmp_path / "users.csv"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_users(path)
    assert where in str(error.value) and why in str(error.value)


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        ('[[user]]\nname = "bob"\n', "user #1.token_sha256", "64 hex"),
        (f'[[user]]\nname = "bob"\ntoken_sha256 = "{digest("b")}"\nweight = "x"\n',
         "user #1.weight", "> 0"),
        (f'[[user]]\nname = "bob"\ntoken_sha256 = "{digest("b")}"\nrole = "x"\n',
         "user #1", "unknown field"),
        ('[[user]\nname = "bob"\n', "users.toml", "not valid TOML"),
        ('[users]\nname = "bob"\n', "users.toml", "unknown table"),
    ],
)  # fmt: skip
def test_a_bad_toml_entry_is_named_with_its_field(
    tmp_path: Path, text: str, where: str, why: str
) -> None:
    path = tmp_path / "users.toml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_users(path)
    assert where in str(error.value) and why in str(error.value)


def test_an_unreadable_or_unknown_kind_of_file_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_users(tmp_path / "missing.toml")
    other = tmp_path / "users.json"
    other.write_text("{}")
    with pytest.raises(InputError, match=r"\.toml or \.csv"):
        load_users(other)


def test_without_a_users_file_the_cluster_token_is_the_one_admin() -> None:
    users = single_admin("cluster-token")
    admin = users.identify("cluster-token")
    assert admin is not None and admin.name == DEFAULT_ADMIN and admin.admin
    assert users.open_names and hash_token("cluster-token") == admin.token_sha256


class _Details:
    def __init__(self, method: str, token: str) -> None:
        self.method = method
        self.invocation_metadata = token_metadata(token)


@pytest.mark.parametrize(
    ("method", "token", "allowed"),
    [
        ("/shock.cluster.v1.Scheduler/Heartbeat", "worker-token", True),
        ("/shock.cluster.v1.Scheduler/Heartbeat", "a-token", False),
        ("/shock.cluster.v1.Jobs/SubmitJob", "a-token", True),
        ("/shock.cluster.v1.Jobs/SubmitJob", "worker-token", False),
        ("/shock.cluster.v1.Jobs/ListJobs", "", False),
    ],
)
def test_workers_use_the_cluster_token_and_users_their_own(
    tmp_path: Path, method: str, token: str, allowed: bool
) -> None:
    path = tmp_path / "users.toml"
    path.write_text(TOML)
    users = load_users(path)
    interceptor = TokenInterceptor("worker-token", users)
    passed = grpc.unary_unary_rpc_method_handler(lambda request, context: None)
    details = _Details(method, token)
    handler = interceptor.intercept_service(lambda _: passed, details)
    assert (handler is passed) == allowed
