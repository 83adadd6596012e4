"""A `command` agent for the real task sets: it reads what an agent would (the instruction
files at the root, then README.md) and answers with the first line matching the pattern its
task asks about: that line's command, a citation of it, a verdict. Deterministic, so the
scores show only what each condition's files hold. Protocol: prompt on stdin, JSON on stdout."""

import json
import re
import sys
from pathlib import Path

PATTERNS = {
    "core minijinja crate": r"cargo test -p minijinja --all-features",
    "Insta snapshot": r"cargo insta test --all-features --accept",
    "MSRV": r"MSRV is [0-9.]+",
    "MiniJinja 2": r"v2 should target",
    "minijinja-cli": r"curl -sSfL \S+minijinja-cli-installer\.sh \| sh",
    "provider YAML": r"(?<=`)make build(?=`, not)",
    "overwrite": r"Never overwrite a `prices:` block",
    "usages.json": r"Never hand-edit `tests/dataset/usages\.json`|tests/dataset/usages\.json",
    "_kcount": r"`_kcount` is per 1,000",
    "slim v2": r"prices/new_data/v2/data_slim\.schema\.json",
    "logfire package": r"vp run logfire#test",
    "changeset": r"pnpm run changeset-add",
    "toContain": r"Prefer exact assertions",
    "Node.js SDK": r"npm install @pydantic/logfire-node",
}
FILES = ("AGENTS.md", "CLAUDE.md", "README.md")

prompt = sys.stdin.read()
pattern = next(p for key, p in PATTERNS.items() if key in prompt)
answer: dict[str, object] = {"answer": "not found", "commands": [], "files": [], "citations": []}
for name in FILES:
    path = Path(name)
    if not path.is_file():
        continue
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        found = re.search(pattern, line)
        if found:
            text = found.group(0)
            answer = {
                "answer": line.strip(),
                "commands": [text] if " " in text and not text[0].isupper() else [],
                "files": re.findall(r"[\w./-]+\.(?:json|msrv|md)\b", line),
                "citations": [{"path": name, "lines": number}],
                "verdict": "no" if re.search(r"\b(?:Never|not|Prefer)\b", line) else "yes",
            }
            break
    if answer["citations"]:
        break
print(json.dumps(answer))
