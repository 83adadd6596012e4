"""Runs of one sealed checkout share nothing writable (copy-on-write views).

The attack first, against every provider: an agent that writes through a hard link,
rewrites a file in place, truncates, deletes, renames and commits must change only its
own workspace. The sealed checkout (which the local provider's overlay uses as its lower
layer, and the Docker provider archives once) and a second live run of the same checkout
stay as they were, and the agent's diff is exactly what it did.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from toolchain import CheckoutFactory

from conformance.providers import ProviderFactory
from docdelta.grading.hidden import capture_agent_diff
from docdelta.sandbox import SandboxSpec

ATTACK = r"""
set -e
ln README.md hard-link
echo hacked-through-the-link >> hard-link
printf 'rewritten in place\n' > src/app.py
python3 -c 'f = open("src/data.txt", "r+b"); f.write(b"X"); f.close()'
: > notes.txt
rm docs/old.md
mv docs moved-docs
git add -A >/dev/null && git -c user.name=a -c user.email=a@b commit -qm mine
"""
FILES = {
    "README.md": "hello\n",
    "src/app.py": "print('hi')\n",
    "src/data.txt": "data\n",
    "notes.txt": "keep me\n",
    "docs/old.md": "old\n",
    "docs/keep.md": "keep\n",
}
CHANGED = [
    "README.md",
    "docs/keep.md",
    "docs/old.md",
    "hard-link",
    "moved-docs/keep.md",
    "notes.txt",
    "src/app.py",
    "src/data.txt",
]


def tree(root: Path) -> dict[str, str]:
    """Every file's mode and content hash, and every link, under root (.git included)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = f"L:{os.readlink(path)}"
        elif path.is_file():
            out[rel] = f"{path.stat().st_mode:o}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


def test_an_agent_writing_through_a_hard_link_changes_only_its_own_run(
    tmp_checkout: CheckoutFactory, provider_factory: ProviderFactory, tmp_path: Path
) -> None:
    sealed = tmp_checkout(FILES)
    before = tree(sealed)
    first, second = provider_factory(tmp_path / "first"), provider_factory(tmp_path / "second")
    try:
        with first.create(sealed, SandboxSpec()) as mine, second.create(sealed, SandboxSpec()) as other:
            head = other.exec(["git", "rev-parse", "HEAD"]).stdout.decode().strip()
            attack = mine.exec(["sh", "-c", ATTACK])
            assert attack.exit_code == 0, attack.stderr.decode()
            # The attack did happen, in its own workspace ...
            assert mine.read_file("README.md") == b"hello\nhacked-through-the-link\n"
            assert mine.read_file("src/data.txt") == b"Xata\n"
            # ... and nowhere else: not in the sealed checkout, not in another live run.
            assert tree(sealed) == before
            assert other.read_file("README.md") == b"hello\n"
            assert other.read_file("src/data.txt") == b"data\n"
            assert other.exec(["git", "status", "--porcelain"]).stdout == b""
            assert capture_agent_diff(other, head) == b""
            # The agent's diff is exactly what it did, its own commit included.
            diff = capture_agent_diff(mine, head).decode()
            heads = [line.split(" b/")[-1] for line in diff.splitlines() if line.startswith("diff --git")]
            assert sorted(heads) == CHANGED
            assert "+rewritten in place" in diff and "-keep me" in diff
        with first.create(sealed, SandboxSpec()) as later:
            assert later.read_file("README.md") == b"hello\n", "the next run starts from the sealed state"
    finally:
        first.close()
        second.close()
    assert tree(sealed) == before
