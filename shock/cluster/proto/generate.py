"""Regenerate the checked-in gRPC stubs: `python -m shock.cluster.proto.generate [OUT_ROOT]`.

The .proto file is compiled with the repository root as include path, so the stubs import
each other as `shock.cluster.proto.…`. OUT_ROOT defaults to the directory holding the
`shock` package (the repository root in a checkout); the stubs land in
`OUT_ROOT/shock/cluster/proto/`.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_FILE = "shock/cluster/proto/shock_cluster.proto"
GENERATED = ("shock_cluster_pb2.py", "shock_cluster_pb2.pyi", "shock_cluster_pb2_grpc.py")


def package_root() -> Path:
    """The directory that holds the `shock` package."""
    return Path(__file__).resolve().parents[3]


def generate(out_root: Path) -> list[Path]:
    from grpc_tools import protoc  # a dev dependency: only needed to regenerate

    root = package_root()
    (out_root / Path(PROTO_FILE).parent).mkdir(parents=True, exist_ok=True)
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{root}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            str(root / PROTO_FILE),
        ]
    )
    if status != 0:
        raise SystemExit(f"protoc failed with status {status}")
    return [out_root / Path(PROTO_FILE).parent / name for name in GENERATED]


def main() -> None:
    arguments = sys.argv[1:]
    if arguments in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(arguments) > 1 or (arguments and arguments[0].startswith("-")):
        # An unknown option is not an output directory.
        raise SystemExit(f"usage: python -m shock.cluster.proto.generate [OUT_ROOT]\n{__doc__}")
    out_root = Path(arguments[0]) if arguments else package_root()
    for path in generate(out_root):
        print(path)


if __name__ == "__main__":
    main()
