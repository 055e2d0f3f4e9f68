#!/usr/bin/env bash
# Installs an offline bundle made by `make bundle`, on a GPU host without network.
# Run it from the repository root:   bash build/<base>/bundle/install.sh [PIP_TARGET]
#   1. checks, before it changes anything: every file of the bundle against
#      MANIFEST.sha256 (and refuses extras), that it runs in the repository root,
#      the bundle's BASE, every entry of the trees and of trees/patched.deleted
#      (a relative path, no `..` or `.git`, no link), and the trees already there
#      (sglpatch/unbundle.py): one that holds anything the bundle did not put
#      there (an edit, a file of yours) is refused, naming it;
#   2. installs the wheels into PIP_TARGET (default: build/gpu-site), offline;
#   3. unpacks trees/base.tar.xz into $BUILD/<base>/base and, with
#      trees/patched.tar.xz (every file the series adds or changes, wherever it
#      is) over it and the files of trees/patched.deleted removed, into
#      $BUILD/<base>/sglang (sglpatch's Layout; <base> is the bundle's BASE file,
#      BUILD defaults to build); a tree there that already is the bundle's is
#      left as it is.
# Then: export PYTHONPATH=<PIP_TARGET> (torch must already be installed).
# A refusal is one line, `install.sh: error: ...`, and exit status 2.
set -euo pipefail

bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-build/gpu-site}"
build="${BUILD:-build}"
python="${PYTHON:-python3}"

"$python" - "$bundle" "$build" <<'PY'
import hashlib
import sys
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


def check_trees(bundle: Path, build: str) -> None:
    sys.path.insert(0, "scripts")  # the repository root: checked above
    from sglpatch import unbundle
    from sglpatch.errors import UserError

    try:
        unbundle.check(bundle, build)
    except (UserError, OSError) as exc:
        fail(str(exc))


bundle, build = Path(sys.argv[1]), sys.argv[2]
count = check_manifest(bundle)
check_root()
check_trees(bundle, build)
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
import sys
from pathlib import Path

sys.path.insert(0, "scripts")  # the repository root: checked above
from sglpatch import unbundle  # noqa: E402  (the trees: sglpatch/unbundle.py)
from sglpatch.errors import UserError  # noqa: E402

bundle = Path(sys.argv[1])
try:
    for tree in unbundle.check(bundle, sys.argv[2]):  # again: pip ran meanwhile
        print(f"install.sh: {unbundle.unpack(bundle, tree)}")
except (UserError, OSError) as exc:
    print(f"install.sh: error: {' '.join(str(exc).split())}", file=sys.stderr)
    raise SystemExit(2) from None
PY
echo "install.sh: done; now: export PYTHONPATH=$(cd "$target" && pwd)"
