"""The people who use a cluster service: `shock serve --users FILE`.

Each user has a name (the entity its jobs belong to, for hierarchical policies), a weight
(the entity's weight), the SHA-256 of their token (the service never stores tokens
themselves) and whether they are an admin (who may cancel anyone's jobs and submit for
others). The file is TOML (a `[[user]]` table per user) or CSV (a header line
`name,weight,token_sha256,admin`). Without a users file the service has one admin user,
`admin`, whose token is the cluster token: a lab of one.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import math
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shock.core.errors import InputError

DEFAULT_ADMIN = "admin"
FIELDS = ("name", "weight", "token_sha256", "admin")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class User:
    name: str
    weight: float = 1.0
    token_sha256: str = ""
    admin: bool = False


@dataclass(frozen=True, slots=True)
class Users:
    users: tuple[User, ...]
    # Without a users file anyone with the cluster token is the one admin, and may label
    # jobs with any user name (entities of weight 1).
    open_names: bool = False

    def identify(self, token: str) -> User | None:
        """The user whose token this is (compared in constant time)."""
        digest = hash_token(token)
        found = None
        for user in self.users:
            if hmac.compare_digest(digest, user.token_sha256):
                found = user
        return found

    def get(self, name: str) -> User | None:
        return next((user for user in self.users if user.name == name), None)

    def weights(self) -> dict[str, float]:
        """Entity weights for the policies."""
        return {user.name: user.weight for user in self.users}


def single_admin(cluster_token: str) -> Users:
    return Users((User(DEFAULT_ADMIN, 1.0, hash_token(cluster_token), True),), open_names=True)


def load_users(path: Path) -> Users:
    """Read a users file (TOML or CSV, by its suffix); every error names the file, the line
    (CSV) or entry (TOML) and the field."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path, field="--users") from exc
    if path.suffix.lower() == ".csv":
        users = list(_csv_users(path, text))
    elif path.suffix.lower() == ".toml":
        users = list(_toml_users(path, text))
    else:
        raise InputError("a users file ends in .toml or .csv", path=path, field="--users")
    if not users:
        raise InputError("names no user", path=path)
    return Users(tuple(users))


def _toml_users(path: Path, text: str) -> Iterable[User]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", path=path) from exc
    unknown = [key for key in document if key != "user"]
    if unknown:
        raise InputError(
            f"unknown table(s) {', '.join(unknown)}: users are [[user]] tables", path=path
        )
    entries = document.get("user", [])
    if not isinstance(entries, list):
        raise InputError("must be [[user]] tables", path=path, field="user")
    seen = _Seen(path)
    for index, entry in enumerate(entries, start=1):
        where = f"user #{index}"
        if not isinstance(entry, dict):
            raise InputError("must be a table", path=path, field=where)
        extra = [key for key in entry if key not in FIELDS]
        if extra:
            raise InputError(
                f"unknown field(s) {', '.join(extra)} (fields: {', '.join(FIELDS)})",
                path=path, field=where,
            )  # fmt: skip
        yield seen.add(_user(path, None, where, entry))


def _csv_users(path: Path, text: str) -> Iterable[User]:
    lines = text.splitlines()
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != list(FIELDS):
        raise InputError(f"the header must be {','.join(FIELDS)}", path=path, line=1)
    seen = _Seen(path)
    for line_number, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) != len(FIELDS):
            raise InputError(
                f"has {len(row)} fields, expected {len(FIELDS)} ({','.join(FIELDS)})",
                path=path, line=line_number,
            )  # fmt: skip
        entry: dict[str, object] = {
            key: value.strip() for key, value in zip(FIELDS, row, strict=True)
        }
        yield seen.add(_user(path, line_number, None, entry))


class _Seen:
    """Refuses a name or a token given twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: set[str] = set()
        self.hashes: set[str] = set()

    def add(self, user: User) -> User:
        if user.name in self.names:
            raise InputError(f"user '{user.name}' appears twice", path=self.path, field="name")
        if user.token_sha256 in self.hashes:
            raise InputError(
                f"user '{user.name}' has the same token as another user",
                path=self.path, field="token_sha256",
            )  # fmt: skip
        self.names.add(user.name)
        self.hashes.add(user.token_sha256)
        return user


def _user(path: Path, line: int | None, entry_name: str | None, entry: dict[str, object]
          ) -> User:  # fmt: skip
    def fail(field: str, message: str) -> InputError:
        label = field if entry_name is None else f"{entry_name}.{field}"
        return InputError(message, path=path, line=line, field=label)

    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise fail("name", f"{name!r} is not a user name (letters, digits, _ . @ -)")
    weight_value = entry.get("weight", 1.0)
    try:
        weight = float(weight_value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        weight = math.nan
    if isinstance(weight_value, bool) or not (weight > 0 and math.isfinite(weight)):
        raise fail("weight", f"{weight_value!r} is not a finite number > 0")
    digest = entry.get("token_sha256")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest.lower()):
        raise fail(
            "token_sha256",
            "must be the token's SHA-256 as 64 hex digits (printf %s TOKEN | sha256sum)",
        )
    admin = entry.get("admin", False)
    if isinstance(admin, str):
        lowered = admin.lower()
        if lowered not in ("true", "false"):
            raise fail("admin", f"{admin!r} is not true or false")
        admin = lowered == "true"
    if not isinstance(admin, bool):
        raise fail("admin", f"{admin!r} is not true or false")
    return User(name, weight, digest.lower(), admin)
