#!/usr/bin/env bash
# Installs an offline bundle made by `make bundle`, on a GPU host without network.
# Run it from the repository root:   bash build/bundle/install.sh [PIP_TARGET]
#   1. checks every file of the bundle against MANIFEST.sha256 (and refuses extras);
#   2. installs the wheels into PIP_TARGET (default: build/gpu-site), offline;
#   3. unpacks trees/base.tar.gz into $BUILD/<base>/base/python and, with
#      trees/patched.tar.gz (the files the series changes) over it and the files
#      of trees/patched.deleted removed, into $BUILD/<base>/sglang/python (sglpatch's Layout;
#      <base> is the bundle's BASE file, BUILD defaults to build), refusing unsafe
#      entries.
# Then: export PYTHONPATH=<PIP_TARGET> (torch must already be installed).
set -euo pipefail

bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-build/gpu-site}"
build="${BUILD:-build}"
python="${PYTHON:-python3}"

"$python" - "$bundle" <<'PY'
import hashlib
import sys
from pathlib import Path

bundle = Path(sys.argv[1])
listed = {}
for line in (bundle / "MANIFEST.sha256").read_text().splitlines():
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
    sys.exit("install.sh: bundle is damaged: " + "; ".join(problems))
print(f"install.sh: {len(listed)} files match MANIFEST.sha256")
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

sys.path.insert(0, "scripts")  # run from the repository root (see the top)
from sglpatch.layout import Layout  # noqa: E402  (where the trees live: one place)

bundle = Path(sys.argv[1])
layout = Layout.create(sys.argv[2], base=(bundle / "BASE").read_text().strip())


def check(archive: tarfile.TarFile, name: str) -> None:
    for member in archive.getmembers():
        inside = member.name == "sglang" or member.name.startswith("sglang/")
        if not inside or not (member.isfile() or member.isdir()):
            sys.exit(f"install.sh: unsafe entry {member.name!r} in {name}")


def deleted() -> list[str]:
    names = (bundle / "trees" / "patched.deleted").read_text().splitlines()
    for name in names:
        if not name.startswith("python/sglang/") or ".." in name.split("/"):
            sys.exit(f"install.sh: unsafe entry {name!r} in patched.deleted")
    return [name.removeprefix("python/") for name in names]


# The base tree; the patched tree is the base tree with the series' files over it.
for tree, dest, layers in (
    ("base", layout.base_tree, ["base.tar.gz"]),
    ("patched", layout.patched_tree, ["base.tar.gz", "patched.tar.gz"]),
):
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))
    try:
        for name in layers:
            with tarfile.open(bundle / "trees" / name) as archive:
                check(archive, name)
                archive.extractall(staging, filter="data")
        for name in deleted() if tree == "patched" else []:
            (staging / name).unlink()
        shutil.rmtree(dest / "sglang", ignore_errors=True)
        (staging / "sglang").rename(dest / "sglang")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"install.sh: unpacked {tree} tree into {dest}")
PY
echo "install.sh: done; now: export PYTHONPATH=$(cd "$target" && pwd)"
