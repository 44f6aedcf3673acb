#!/usr/bin/env bash
# Prepares the release VERSION (vX.Y.Z) of every module of the repository,
# on a clean work tree, and prints the tags to push. It tags and pushes
# nothing.
#
#   bash internal/release/release.sh v0.2.0
#
# 1. CHANGELOG.md: the Unreleased section becomes VERSION, dated today,
#    under a new, empty Unreleased section.
# 2. Every require of one of the repository's modules, in every go.mod, and
#    go.work's replace lines name VERSION.
# 3. Every module is tidied outside the workspace (GOWORK=off) against the
#    work tree published at VERSION into a temporary module proxy, so that
#    each go.sum holds the hashes the tags will have.
# 4. The result is committed ("release: VERSION"). Tag that commit, and only
#    that commit: the go.sum hashes are of its tree.
set -euo pipefail
version=${1:?usage: release.sh vX.Y.Z}
cd "$(dirname "$0")/../.."

if [ -n "$(git status --porcelain)" ]; then
	echo "release: the work tree has changes; commit or stash them first" >&2
	exit 1
fi
grep -q '^## \[Unreleased\]$' CHANGELOG.md || {
	echo "release: CHANGELOG.md has no '## [Unreleased]' section" >&2
	exit 1
}
release() { GOWORK=off go -C internal/release run . "$@"; }

release version "$version" # checks VERSION before anything changes
sed -i "s/^## \[Unreleased\]\$/## [Unreleased]\n\n## [$version] - $(date -u +%Y-%m-%d)/" CHANGELOG.md
release tidy -sums
git add -A
git commit -q -m "release: $version"

mapfile -t tags < <(release tags)
echo "release: committed $(git rev-parse --short HEAD) (release: $version). Review it, then tag it and push the tags:"
echo
for t in "${tags[@]}"; do
	echo "  git tag $t"
done
echo "  git push origin ${tags[*]}"
