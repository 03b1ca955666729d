# batchd worker image. `make image` builds it with buildah; with Docker: `docker build -t batchd:0.1.0 .`.
# Deploy with `kubectl apply -k deploy/base` (docs/operations.md, "Running on a real cluster").
#
# BASE is any Debian-like image with python3 (>= 3.11) and its venv module: python:3.11-slim from
# a registry, or a local Debian root file system (`make debian-base`, what the tests use where no
# registry is reachable). Builder and runtime use the same BASE, so the virtualenv's interpreter
# link resolves in both.
ARG BASE=python:3.11-slim

FROM ${BASE} AS builder
# Wheels already built elsewhere may be put in build/wheelhouse (`make image` does, with the
# host's pip, and sets PIP_NO_INDEX=1 so the build needs no network and no TLS trust); without
# them pip downloads from PyPI.
ARG PIP_NO_INDEX=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_FIND_LINKS=/src/build/wheelhouse
WORKDIR /src
# The dependencies first, in a layer of their own, rebuilt only when the wheels or pyproject.toml
# change, not with every change to batchd's code. (The pattern lets a build without a wheelhouse
# copy pyproject.toml alone; its dependencies then come from PyPI in the next step.)
COPY pyproject.toml build/wheelhous[e] /src/deps/
RUN python3 -m venv /opt/batchd \
 && if ls /src/deps/*.whl >/dev/null 2>&1; then /opt/batchd/bin/pip install --quiet /src/deps/*.whl; fi
COPY . .
RUN /opt/batchd/bin/pip install --quiet . \
 && /opt/batchd/bin/pip uninstall --quiet --yes pip

FROM ${BASE} AS runtime
COPY --from=builder /opt/batchd /opt/batchd
# The user, then everything a Python worker does not need and an intruder would: shells,
# coreutils, package managers and their databases. Only the interpreter stays in the system
# bin directories (the console script's shebang names the venv's python, which links to it).
# This must stay the last RUN: after it there is no /bin/sh to run another.
RUN groupadd --gid 10001 batchd \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin batchd \
 && rm -rf /var/lib/apt /var/lib/dpkg /var/cache/* /var/log/* /usr/share/doc /usr/share/man /usr/share/info \
 && find /usr/bin /usr/sbin /usr/local/bin /usr/local/sbin -mindepth 1 \( -type f -o -type l \) \
      -regextype posix-extended ! -regex '.*/python3(\.[0-9]+)?' -delete
ENV PATH=/opt/batchd/bin PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
# /healthz, /readyz and /metrics
EXPOSE 8080
ENTRYPOINT ["/opt/batchd/bin/batchd"]
CMD ["worker"]
