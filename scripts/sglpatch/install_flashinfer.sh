#!/usr/bin/env bash
# Installs the FlashInfer wheels staged by `make flashinfer` (sglpatch/flashinfer_wheels.py)
# on a GPU host without network. Run it from the repository root, with every part there:
#   bash build/<base>/flashinfer/<last part>/install.sh [PIP_TARGET]
#   1. checks, before it changes anything, that every piece MANIFEST.sha256 lists is in
#      its part folder with that sha256 (a missing part is named: carry it);
#   2. joins each wheel's pieces in a scratch folder and checks the wheel's sha256;
#   3. installs the wheels into PIP_TARGET (default: build/gpu-flashinfer) with
#      pip --no-index --no-deps --target, and removes the scratch folder.
# Then put PIP_TARGET on PYTHONPATH after the bundle's (torch must already be installed).
# A refusal is one line, `install.sh: error: ...`, and exit status 2.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-build/gpu-flashinfer}"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/flashinfer-wheels.XXXXXX")"
trap 'rm -rf "$work"' EXIT

"$python" - "$(dirname "$here")" "$here/MANIFEST.sha256" "$work" <<'PY'
import hashlib
import sys
from pathlib import Path


def fail(message: str) -> None:
    print(f"install.sh: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(2)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


stage, manifest, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
if not manifest.is_file():
    fail(f"{manifest} is missing: run the install.sh of the last part `make flashinfer` wrote")
pieces, wheels = {}, {}
for line in manifest.read_text().splitlines():
    digest, _, name = line.partition("  ")
    if name.startswith("wheel "):
        wheels[name.removeprefix("wheel ")] = digest
    else:
        part, _, piece = name.partition("/")
        if not part.startswith("part") or "/" in piece or not piece or ".." in piece:
            fail(f"{manifest}: bad entry {name!r}")
        pieces[name] = digest
problems, missing_parts = [], set()
for name, digest in sorted(pieces.items()):
    path = stage / name
    if not path.is_file() or path.is_symlink():
        missing_parts.add(name.split("/")[0])
    elif sha256(path) != digest:
        problems.append(f"checksum mismatch: {name}")
if missing_parts:
    problems.insert(0, f"missing {', '.join(sorted(missing_parts))} of {stage} (carry it)")
if problems:
    fail("; ".join(problems))
for wheel, digest in sorted(wheels.items()):
    names = [n for n in pieces if n.split("/", 1)[1].rsplit(".", 1)[0] == wheel]
    names.sort(key=lambda n: n.rsplit(".", 1)[1])  # .000, .001 ...
    with (work / wheel).open("wb") as out:
        for name in names:
            out.write((stage / name).read_bytes())
    if sha256(work / wheel) != digest:
        fail(f"{wheel}: the joined pieces do not have the sha256 MANIFEST.sha256 lists")
print(f"install.sh: {len(pieces)} pieces and {len(wheels)} wheels match MANIFEST.sha256")
PY

wheels=("$work"/*.whl)
"$python" -m pip install -q --no-index --no-deps --no-compile --upgrade \
    --target "$target" "${wheels[@]}"
echo "install.sh: installed ${#wheels[@]} wheels into $target"
echo "install.sh: done; now put $(cd "$target" && pwd) on PYTHONPATH"
