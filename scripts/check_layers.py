#!/usr/bin/env python3
"""The crates import downward: fails when a workspace crate depends on one above it.

Layers, from the bottom: the libraries (`protos/`, `crates/*`), the services
(`services/*`), the gateway (`gateway/`), the binary (`droidmesh/`) that wires them all.
A library depends on no service, gateway or binary; a service on no other service, the
gateway or the binary; the gateway on no service or the binary (it calls them over gRPC,
through `droidmesh-proto`); nothing depends on the binary. Normal and build dependencies
count; dev-dependencies do not (a service's tests may start a real device service).
`tests/` (the cross-process tests) may use anything.

Test kits stay out of production builds: a crate's `testkit` feature (model doubles, a private
adb server, a throwaway PostgreSQL) is enabled only by dev-dependencies. Any workspace crate,
`tests/` included, whose normal or build dependency enables a `testkit` feature fails the check.

Reads `cargo metadata --format-version 1 --no-deps`; standard library only.
Usage: python3 scripts/check_layers.py [--metadata FILE]  (FILE: that command's output)
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def layer(rel):
    """The layer of a package by its folder in the workspace, or None for one not checked."""
    top = rel.parts[0] if rel.parts else ""
    if top in ("protos", "crates"):
        return "library"
    if top == "services":
        return "service"
    if top == "gateway":
        return "gateway"
    if top == "droidmesh":
        return "binary"
    return None


# The feature that builds a crate's test kit; only dev-dependencies may enable it.
TESTKIT = "testkit"

EXPECTED = {
    "library": "a library to depend only on libraries (protos/, crates/*)",
    "service": "a service to depend only on libraries (protos/, crates/*)",
    "gateway": "the gateway to depend only on libraries (protos/, crates/*)",
    "binary": "nothing to depend on the binary",
}


def allowed(src, dst):
    """Whether a package of layer `src` may depend on another workspace package of layer `dst`."""
    if dst == "binary":
        return False
    if src == "library":
        return dst == "library"
    if src in ("service", "gateway"):
        return dst == "library"
    return True


def problems(metadata):
    root = Path(metadata["workspace_root"])
    members = set(metadata.get("workspace_members", []))
    by_dir = {}
    for p in metadata["packages"]:
        if members and p["id"] not in members:
            continue
        rel = Path(p["manifest_path"]).parent.relative_to(root)
        by_dir[rel] = p
    layers = {p["name"]: (rel, layer(rel)) for rel, p in by_dir.items()}
    found = []
    for rel, p in sorted(by_dir.items()):
        for d in p["dependencies"]:
            if d.get("kind") == "dev" or TESTKIT not in d.get("features", []):
                continue
            kind = "build-dependency" if d.get("kind") == "build" else "dependency"
            found.append(
                f"{rel}/Cargo.toml: {p['name']} has a {kind} on {d['name']} with feature "
                f"\"{TESTKIT}\"; expected the test kit only in [dev-dependencies]: move "
                f"`features = [\"{TESTKIT}\"]` to {d['name']} under [dev-dependencies]"
            )
        src = layer(rel)
        if src is None:
            continue
        for d in p["dependencies"]:
            if d.get("kind") == "dev" or d["name"] not in layers:
                continue
            dst_rel, dst = layers[d["name"]]
            if dst is None or allowed(src, dst):
                continue
            kind = "build-dependency" if d.get("kind") == "build" else "dependency"
            found.append(
                f"{rel}/Cargo.toml: {p['name']} (a {src}) has a {kind} on {d['name']} "
                f"({dst_rel}/, a {dst}); expected {EXPECTED[src]}: move what both need into a "
                f"library under crates/{'' if dst == 'binary' else f', or call the {dst} over gRPC'}"
            )
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metadata", help="a file with `cargo metadata --format-version 1 --no-deps` output")
    args = parser.parse_args()
    if args.metadata:
        text = Path(args.metadata).read_text()
    else:
        text = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps"],
            cwd=Path(__file__).resolve().parent.parent,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    metadata = json.loads(text)
    found = problems(metadata)
    for f in found:
        print(f"check-layers: {f}", file=sys.stderr)
    if found:
        print(
            f"check-layers: {len(found)} dependencies point up the layers or build a test kit",
            file=sys.stderr,
        )
        return 1
    print(
        f"check-layers: {len(metadata['packages'])} packages, every dependency points down "
        "and no test kit is in a production build"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
