#!/usr/bin/env bash
# Runs Go fuzz targets one after the other, each for $FUZZTIME (default 30s).
#
#   scripts/fuzz.sh [PACKAGE:FuzzName ...]
#
# Without arguments it runs every Fuzz function of every package in the
# module. New failing inputs land in the package's testdata/fuzz and then run
# as ordinary test cases in `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for pkg in $("$GO" list ./...); do
    while read -r name; do
      case "$name" in Fuzz*) targets+=("$pkg:$name") ;; esac
    done < <("$GO" test -list '^Fuzz' "$pkg")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets found"
  exit 0
fi
for t in "${targets[@]}"; do
  pkg=${t%%:*}
  name=${t#*:}
  echo "== $pkg $name ($FUZZTIME)"
  "$GO" test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME"
done
