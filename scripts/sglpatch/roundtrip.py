"""Whether ``git am`` reads an exported patch back as the commit it came from.

The patch is read the way ``git am --keep-non-patch`` reads it (``git
mailsplit``, ``git mailinfo -b -u``, the message rebuilt as subject, blank
line, body, ``git stripspace``d), and its diff is applied to the parent's tree
in a scratch index.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sglpatch.gitcmd import Git

EMPTY = "it changes no file, and git am cannot apply an empty patch"


def why_not(git: Git, commit: str, patch: bytes) -> str | None:
    """Why ``patch`` would not become ``commit`` again through git am; None if it would."""
    if not patch.strip():  # format-patch writes nothing for an empty commit
        return EMPTY
    with tempfile.TemporaryDirectory(prefix="sglpatch-mail-") as scratch:
        mail = Path(scratch)
        count = git.run("mailsplit", f"-o{mail}", input=patch).stdout.decode().strip()
        if count != "1":
            return f"git am would split it into {count} mails (a line looks like a mbox From line)"
        msg, diff = mail / "msg", mail / "patch"
        info = git.run(
            "mailinfo", "-b", "-u", str(msg), str(diff), input=(mail / "0001").read_bytes()
        )
        fields = _fields(info.stdout.decode("utf-8", "replace"))
        if not diff.read_bytes().strip():
            return EMPTY
        reason = _message_differs(git, commit, fields, msg.read_bytes())
        return reason or _tree_differs(git, commit, diff, mail / "index")


def _fields(info: str) -> dict[str, str]:
    """``Author``, ``Email``, ``Subject`` and ``Date`` as git mailinfo printed them."""
    pairs = (line.partition(": ") for line in info.splitlines() if ": " in line)
    return {key: value for key, _, value in pairs}


def _message_differs(git: Git, commit: str, fields: dict[str, str], body: bytes) -> str | None:
    """How the message or author git am would make differs from the commit's."""
    raw = git.run("cat-file", "commit", commit).stdout
    headers, _, message = raw.partition(b"\n\n")
    if any(line.startswith(b"encoding ") for line in headers.splitlines()):
        return "its message is not UTF-8 (it has an encoding header)"
    try:
        message.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = message[: exc.start].count(b"\n") + 1
        return f"its message is not UTF-8 (raw bytes on line {line}; git am reads it as UTF-8)"
    subject = fields.get("Subject", "")
    rebuilt = git.run("stripspace", input=subject.encode() + b"\n\n" + body).stdout
    original = git.out("log", "-1", "--format=%s", commit)
    if subject != original:
        return f"git am would read its subject back as {subject!r}"
    if rebuilt != message:
        return (
            "git am would cut or reflow its message (a line '---', 'diff -' or 'Index: '"
            " ends a message, blank lines and trailing spaces are squeezed)"
        )
    author = git.out("log", "-1", "--format=%an <%ae> %aD", commit)
    read = f"{fields.get('Author', '')} <{fields.get('Email', '')}> {fields.get('Date', '')}"
    if read != author:
        return f"git am would read its author back as {read!r}, not {author!r}"
    return None


def _tree_differs(git: Git, commit: str, diff: Path, index: Path) -> str | None:
    """Whether the diff applied to the parent's tree gives the commit's tree."""
    env = {"GIT_INDEX_FILE": str(index)}
    git.run("read-tree", f"{commit}^", env=env)
    if git.run("apply", "--cached", str(diff), check=False, env=env).returncode != 0:
        return "its diff does not apply back to its parent"
    if git.out("write-tree", env=env) != git.out("rev-parse", f"{commit}^{{tree}}"):
        return "its diff applied to its parent does not give its tree"
    return None
