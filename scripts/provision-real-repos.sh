#!/usr/bin/env bash
# The real-repository bundles tests/real runs on, for a CI that has no copy of them beside
# the clone (GitHub's): clones each upstream, pins `main` to the commit the tests were
# written against, and writes DIR/NAME.bundle with the same refs as the shared bundles
# (HEAD and refs/heads/main, full history). Bundles already in DIR are kept.
#   bash scripts/provision-real-repos.sh DIR
set -euo pipefail

DIR=${1:?usage: provision-real-repos.sh DIR (where the .bundle files go)}
# name upstream pinned-main-commit (the heads listed in the shared bundles' README)
REPOS=(
  "minijinja mitsuhiko/minijinja eb17be5752d267eb446465a23a90e3818a456c6c"
  "genai-prices pydantic/genai-prices 47df840a5ab10bbcffb8e5ac01b9899032245d1b"
  "logfire-js pydantic/logfire-js eb3a2723c36405b0b17c82bd164cc2cfd919d830"
)

mkdir -p "$DIR"
for entry in "${REPOS[@]}"; do
  read -r name upstream commit <<<"$entry"
  [ -f "$DIR/$name.bundle" ] && continue
  work=$(mktemp -d)
  git clone -q --bare "https://github.com/$upstream.git" "$work/$name.git"
  git -C "$work/$name.git" cat-file -e "$commit^{commit}" || {
    echo "provision-real-repos: $upstream has no commit $commit" >&2
    exit 1
  }
  git -C "$work/$name.git" update-ref refs/heads/main "$commit"
  git -C "$work/$name.git" symbolic-ref HEAD refs/heads/main
  git -C "$work/$name.git" bundle create "$DIR/$name.bundle" HEAD refs/heads/main
  rm -rf "$work"
done
ls -l "$DIR"
