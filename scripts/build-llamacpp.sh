#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` and its rpc server for the e2e tests
# that run the real engine (test/e2e/llamacpp.test.ts). The source is the git
# bundle node-llama-cpp ships (node_modules/node-llama-cpp/llama/
# gitRelease.bundle), so nothing is downloaded and the version is the one the
# builtin engine already runs. The result is cached outside the repository,
# keyed by the bundle's hash: a second run, or a run after `git clean`, does
# nothing. The build happens in a temporary directory beside the cache entry
# and is renamed into place, so an interrupted build never leaves a half
# entry that would later pass for a whole one.
#
#   LLMGW_ENGINE_CACHE   the cache root; absent = $XDG_CACHE_HOME/llmgw/engines
#                        (absent XDG_CACHE_HOME = ~/.cache)
#   LLMGW_BUILD_JOBS     parallel compile jobs; absent = nproc
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ ! -f "$bundle" ]; then
  echo "engines:llamacpp: $bundle is missing; run npm ci first (it comes with node-llama-cpp)" >&2
  exit 1
fi
for tool in git cmake ninja c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "engines:llamacpp: $tool is not installed; on Debian: apt-get install git cmake ninja-build g++" >&2
    exit 1
  fi
done

root=${LLMGW_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmgw/engines}
# 16 hex digits tell bundles apart; the full hash goes in the entry's stamp.
hash=$(sha256sum "$bundle" | cut -c1-64)
dest="$root/llamacpp-${hash:0:16}"

if [ -x "$dest/bin/llama-server" ] && [ -x "$dest/bin/ggml-rpc-server" ]; then
  echo "engines:llamacpp: already built in $dest/bin"
  exit 0
fi

mkdir -p "$root"
work=$(mktemp -d "$root/.llamacpp-${hash:0:16}.tmp.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

started=$(date +%s)
commit=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
echo "engines:llamacpp: building llama.cpp ${commit:0:7} from $bundle in $work"
git -c advice.detachedHead=false clone --quiet --no-checkout "$bundle" "$work/src"
git -C "$work/src" -c advice.detachedHead=false checkout --quiet "$commit"

# Static (no libllama.so beside the binaries, so the entry can move), no
# CPU-specific code (the cache may be shared by machines of different CPUs),
# no curl or OpenSSL (the tests hand it local files), no web UI (its
# prebuilt assets would be downloaded), RPC on (the rpc server, and
# llama-server's --rpc for multi-node replicas).
cmake -S "$work/src" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF \
  -DGGML_RPC=ON \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
# This llama.cpp names its rpc server `ggml-rpc-server` (older builds:
# `rpc-server`); the entry keeps the name the build gives.
cmake --build "$work/build" --target llama-server ggml-rpc-server -j "${LLMGW_BUILD_JOBS:-$(nproc)}"

mkdir -p "$work/out/bin"
cp "$work/build/bin/llama-server" "$work/build/bin/ggml-rpc-server" "$work/out/bin/"
printf 'bundle-sha256 %s\ncommit %s\n' "$hash" "$commit" >"$work/out/STAMP"
# Another build may have finished first; its entry is as good as ours.
mv -T "$work/out" "$dest" 2>/dev/null || [ -x "$dest/bin/llama-server" ]

elapsed=$(( $(date +%s) - started ))
echo "engines:llamacpp: built in ${elapsed}s; binaries in $dest/bin"
