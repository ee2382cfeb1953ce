#!/usr/bin/env bash
# Every pointer to a file of the repository, in any tracked file, resolves inside it: paths that
# start with docs/, src/, include/, tests/, apps/, bench/, scripts/, fuzz/ or cmake/ must exist,
# every markdown link resolves from its page, and nothing points to a design or reference page
# outside the repository. Prints each broken pointer with the file that holds it; exits 1 when
# there is one.
#
# Not checked: paths under a build directory (build/..., build-fuzz/...: outputs), and the worked
# example of docs/optimizers.md (files a reader would create for a new optimizer, "lion").
# Usage: scripts/check-pointers.sh [REPO_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0
# The tracked files; without a usable git (no checkout, or one git refuses as another user's), every
# file outside the build directories.
if ! files=$(git ls-files 2>/dev/null) || [ -z "$files" ]; then
  files=$(find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||')
fi
[ -n "$files" ] || { echo "check-pointers: no files found in $PWD"; exit 1; }
while IFS= read -r f; do
  case "$f" in data/* | fuzz/corpus/* | fuzz/crashes/* | *.svg | *.png | *.safetensors | *.bin) continue ;; esac
  [ -f "$f" ] || continue
  while IFS= read -r p; do
    case "$p" in *lion*) continue ;; esac
    p=${p%.}
    [ -e "$p" ] && continue
    echo "$f: $p does not exist"
    status=1
  done < <(grep -ohE "(^|[^A-Za-z0-9_/.-])(docs|src|include|tests|apps|bench|scripts|fuzz|cmake)/[A-Za-z0-9_./+-]*[A-Za-z0-9_]" "$f" |
    sed -E 's/^[^a-z]//' | sort -u)
  if [[ "$f" == *.md ]]; then  # markdown links, relative to the page
    while IFS= read -r l; do
      [ -e "$(dirname "$f")/$l" ] || { echo "$f: link ($l) does not resolve"; status=1; }
    done < <(grep -oE "\]\([^)#]*[)#]" "$f" | sed -E 's/^\]\(//; s/[)#]$//' | grep -v -e "^http" -e "^$" || true)
  fi
  [ "$f" = scripts/check-pointers.sh ] && continue  # its own pattern
  if grep -nE "(^|[^A-Za-z0-9_/.-])(design|reference)\.md" "$f" >/dev/null; then
    echo "$f: names a design.md / reference.md outside docs/ ($(grep -nE "(^|[^A-Za-z0-9_/.-])(design|reference)\.md" "$f" | head -1 | cut -c1-80))"
    status=1
  fi
done <<<"$files"
exit $status
