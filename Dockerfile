# batchd worker image: `docker build -t batchd:0.1.0 .`, then deploy with `kubectl apply -k deploy/base`.
# Stage 1 builds wheels for batchd and its dependencies; stage 2 installs only those wheels into
# a virtualenv on a clean slim image and runs as an unprivileged user (uid 10001).

FROM python:3.11-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY workflows/ workflows/
COPY activities/ activities/
COPY worker/ worker/
COPY kubesim/ kubesim/
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim AS runtime
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/batchd/bin:$PATH
RUN groupadd --gid 10001 batchd \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin batchd
COPY --from=builder /wheels /wheels
RUN python -m venv /opt/batchd \
 && /opt/batchd/bin/pip install --no-index --find-links=/wheels batchd \
 && rm -rf /wheels
USER 10001:10001
# /healthz, /readyz and /metrics
EXPOSE 8080
ENTRYPOINT ["batchd"]
CMD ["worker"]
