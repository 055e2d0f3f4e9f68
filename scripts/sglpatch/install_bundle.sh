#!/usr/bin/env bash
# Installs an offline bundle made by `make bundle`, on a GPU host without network.
# Run it from the repository root:   bash build/bundle/install.sh [PIP_TARGET]
#   1. checks, before it changes anything: every file of the bundle against
#      MANIFEST.sha256 (and refuses extras), that it runs in the repository root,
#      the bundle's BASE, and every entry of the trees (no path out of sglang/,
#      no link) and of trees/patched.deleted;
#   2. installs the wheels into PIP_TARGET (default: build/gpu-site), offline;
#   3. unpacks trees/base.tar.gz into $BUILD/<base>/base/python and, with
#      trees/patched.tar.gz (the files the series changes) over it and the files
#      of trees/patched.deleted removed, into $BUILD/<base>/sglang/python (sglpatch's Layout;
#      <base> is the bundle's BASE file, BUILD defaults to build).
# Then: export PYTHONPATH=<PIP_TARGET> (torch must already be installed).
# A refusal is one line, `install.sh: error: ...`, and exit status 2.
set -euo pipefail

bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-build/gpu-site}"
build="${BUILD:-build}"
python="${PYTHON:-python3}"

"$python" - "$bundle" "$build" <<'PY'
import hashlib
import re
import sys
import tarfile
from pathlib import Path


def fail(message: str) -> None:
    print(f"install.sh: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(2)


def check_manifest(bundle: Path) -> int:
    manifest = bundle / "MANIFEST.sha256"
    if not manifest.is_file():
        fail(f"{bundle} has no MANIFEST.sha256: it is not a bundle made by `make bundle`")
    listed = {}
    for line in manifest.read_text(errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    present = {
        str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() or p.is_symlink()
    }
    present.discard("MANIFEST.sha256")
    problems = [f"not in the manifest: {name}" for name in sorted(present - set(listed))]
    problems += [f"missing: {name}" for name in sorted(set(listed) - present)]
    for name in sorted(set(listed) & present):
        path = bundle / name
        if path.is_symlink() or hashlib.sha256(path.read_bytes()).hexdigest() != listed[name]:
            problems.append(f"checksum mismatch: {name}")
    if problems:
        fail("bundle is damaged: " + "; ".join(problems))
    return len(listed)


def check_root() -> None:
    if not Path("scripts/sglpatch/layout.py").is_file():
        fail(
            f"run it from the repository root (the folder with scripts/sglpatch), not"
            f" {Path.cwd()}: nothing was installed"
        )


def check_base(bundle: Path, build: str) -> None:
    name = (bundle / "BASE").read_text(errors="replace").strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or ".." in name:
        fail(f"the bundle's BASE {name!r} is not the name of a base of patches/bases.toml")
    sys.path.insert(0, "scripts")
    from sglpatch.errors import UserError
    from sglpatch.layout import Layout

    try:
        Layout.create(build, base=name)
    except (UserError, OSError, ValueError) as exc:
        fail(f"the bundle's BASE {name!r}: {' '.join(str(exc).split())}")


def unsafe(name: str) -> bool:
    parts = name.split("/")
    inside = name == "sglang" or name.startswith("sglang/")
    return not inside or ".." in parts or "" in parts[1:-1] or "\\" in name


def check_trees(bundle: Path) -> None:
    for name in ("base.tar.gz", "patched.tar.gz"):
        try:
            with tarfile.open(bundle / "trees" / name) as archive:
                for member in archive.getmembers():
                    if unsafe(member.name) or not (member.isfile() or member.isdir()):
                        fail(f"unsafe entry {member.name!r} in {name}: nothing was installed")
        except tarfile.TarError as exc:
            fail(f"trees/{name} is not a tar.gz archive ({exc})")
    for name in (bundle / "trees" / "patched.deleted").read_text().splitlines():
        if not name.startswith("python/") or unsafe(name.removeprefix("python/")):
            fail(f"unsafe entry {name!r} in patched.deleted: nothing was installed")


bundle, build = Path(sys.argv[1]), sys.argv[2]
count = check_manifest(bundle)
check_root()
check_base(bundle, build)
check_trees(bundle)
print(f"install.sh: {count} files match MANIFEST.sha256")
PY

wheels=()
while IFS= read -r name; do
    wheels+=("$bundle/$name")
done < <(sed -n 's/^[0-9a-f]\{64\}  \(wheels\/[^/]*\.whl\)$/\1/p' "$bundle/MANIFEST.sha256")
"$python" -m pip install -q --no-index --no-deps --no-compile --upgrade \
    --target "$target" "${wheels[@]}"
echo "install.sh: installed ${#wheels[@]} wheels into $target"

"$python" - "$bundle" "$build" <<'PY'
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, "scripts")  # the repository root: checked above
from sglpatch.layout import Layout  # noqa: E402  (where the trees live: one place)

bundle = Path(sys.argv[1])
layout = Layout.create(sys.argv[2], base=(bundle / "BASE").read_text().strip())
deleted = (bundle / "trees" / "patched.deleted").read_text().splitlines()

# The base tree; the patched tree is the base tree with the series' files over it.
# Every entry was checked above; the "data" filter stays as a second guard.
for tree, dest, layers in (
    ("base", layout.base_tree, ["base.tar.gz"]),
    ("patched", layout.patched_tree, ["base.tar.gz", "patched.tar.gz"]),
):
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))
    try:
        for name in layers:
            with tarfile.open(bundle / "trees" / name) as archive:
                archive.extractall(staging, filter="data")
        for name in deleted if tree == "patched" else []:
            (staging / name.removeprefix("python/")).unlink()
        shutil.rmtree(dest / "sglang", ignore_errors=True)
        (staging / "sglang").rename(dest / "sglang")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"install.sh: unpacked {tree} tree into {dest}")
PY
echo "install.sh: done; now: export PYTHONPATH=$(cd "$target" && pwd)"
