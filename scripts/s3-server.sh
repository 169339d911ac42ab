#!/usr/bin/env bash
# Installs the servers benchmarks/bench_remote.py can read a remote store from (not used by the tests or CI):
#
#   scripts/s3-server.sh          # nginx (Debian's nginx-light, C): --server nginx
#   scripts/s3-server.sh s3rver   # also s3rver (Node.js, npm, into ~/.cache/stoker-s3rver): --s3rver EXE, EXE printed
#
# moto_server (--server moto, the default) comes with the dev extra. nginx is the one whose CPU leaves
# the reader its cores (an object store on another machine takes none of them): it serves the store's
# objects as files at their path-style S3 URLs: the GETs and HEADs a reader sends (signatures not
# checked; no LIST, no upload: the benchmark copies the store into its root). Why nginx: a compiled
# S3-protocol server needs a registry these machines do not reach (crates.io for s3s-fs, the Go proxy
# for versitygw/gofakes3, MinIO's own downloads), Debian 12's rclone (1.60) has no `serve s3` (1.65
# added it), and the S3 servers on PyPI are Python. Needs root for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light
fi
/usr/sbin/nginx -v

if [ "${1:-}" = "s3rver" ]; then
    prefix=${S3RVER_PREFIX:-$HOME/.cache/stoker-s3rver}
    npm install --silent --prefix "$prefix" s3rver@3.7.1
    echo "s3rver: $prefix/node_modules/.bin/s3rver"
fi
