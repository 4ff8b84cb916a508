#!/usr/bin/env bash
# Builds a local stand-in for the cuda target's base (the Dockerfile's CUDA_BASE, nvidia/cuda:*-devel-ubuntu24.04) for
# `make image-cuda-check`: no container registry is reachable from this project's machines.
#
#   docker/cuda-standin.sh                 # tags scalerl-cuda-standin:py3.12 (about a minute; once)
#   REBUILD=1 docker/cuda-standin.sh
#
# What it shares with the real base: the Dockerfile's `apt-get install python3 python3-venv python3-dev
# build-essential` yields Python 3.12 (Ubuntu 24.04's minor version), so the cuda stages' pip installs the cp312
# wheels of docker/wheels-cuda as they will there. It is Debian 12 (scalerl-debian:bookworm, from
# ../shared/tools/local-base-images) with CPython 3.12 copied from the host's pyenv into /usr/local (Debian has no
# 3.12), and dummy python3, python3-venv and python3-dev packages that make apt keep it. What it lacks: CUDA (no nvcc,
# no libraries: build with CHECK_NVCC=0), Ubuntu (glibc 2.36, not 2.39: the lock's wheels need 2.34 at most)
# and apt's 3.12.3 (pyenv's 3.12, PYTHON312 to pick another).
set -euo pipefail
tag=${STANDIN_TAG:-scalerl-cuda-standin:py3.12}
if [[ -z ${REBUILD:-} ]] && docker image inspect "$tag" >/dev/null 2>&1; then echo "$tag present"; exit 0; fi
py=${PYTHON312:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.* 2>/dev/null | sort -V | tail -1)}
[[ -x $py/bin/python3.12 ]] || { echo "no CPython 3.12 found (set PYTHON312 to its prefix)" >&2; exit 1; }
docker image inspect scalerl-debian:bookworm >/dev/null 2>&1 || "$(dirname "$0")/../../shared/tools/local-base-images"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The interpreter, its standard library and headers; not its tests nor what the host installed into it.
tar -C "$py" --exclude='lib/python3.12/test' --exclude='lib/python3.12/site-packages/*' -cf "$work/python.tar" .
cat >"$work/Dockerfile" <<'EOF'
FROM scalerl-debian:bookworm
LABEL org.scalerl.standin="nvidia/cuda:*-devel-ubuntu24.04 without CUDA: Debian 12 + CPython 3.12 as apt's python3"
ADD python.tar /usr/local/
# Debian's 3.11 out; python3, python3-venv and python3-dev as installed packages of version 3.12 (so the Dockerfile's
# apt-get install keeps them: 3.12 > 3.11), /usr/bin/python3 the 3.12 in /usr/local, its shared libraries present.
RUN apt-get update \
    && apt-get purge -y --auto-remove python3 python3-minimal python3.11 python3.11-minimal libpython3.11-minimal \
    && apt-get install -y --no-install-recommends libssl3 libffi8 libsqlite3-0 liblzma5 libbz2-1.0 zlib1g \
       libreadline8 libncursesw6 libuuid1 libgdbm6 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && for p in python3 python3-venv python3-dev python3-minimal; do \
         mkdir -p /tmp/$p/DEBIAN \
         && printf 'Package: %s\nVersion: 3.12.99-standin\nArchitecture: all\nMaintainer: scalerl\nDescription: stand-in: CPython 3.12 in /usr/local\n' $p >/tmp/$p/DEBIAN/control \
         && dpkg-deb -b /tmp/$p /tmp/$p.deb >/dev/null && dpkg -i /tmp/$p.deb >/dev/null && rm -rf /tmp/$p /tmp/$p.deb; \
       done \
    && ldconfig && ln -sf /usr/local/bin/python3.12 /usr/bin/python3 \
    && rm -f /usr/local/bin/python /usr/local/bin/pip* /usr/local/bin/idle* /usr/local/bin/2to3* /usr/local/bin/pydoc* \
    && python3 -c "import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, venv, ensurepip; assert sys.version_info[:2] == (3, 12)"
CMD ["python3"]
EOF
docker build -q -t "$tag" "$work" >/dev/null
docker run --rm "$tag" sh -c 'python3 --version; apt-get install -s python3 python3-venv python3-dev 2>/dev/null | grep -c "^Inst" || true'
echo "$tag built"
