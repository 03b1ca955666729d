# The two set-up commands: `make dev` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test durations lint venv clean image debian-base upstream

# `make image` builds the Dockerfile with buildah into local container storage. BASE_IMAGE is
# the build's base: python:3.11-slim from a registry, or $(DEBIAN_BASE) (`make debian-base`)
# where none is reachable. Wheels are built here first, with this machine's pip and its TLS
# trust, so the build itself needs no network.
IMAGE ?= localhost/batchd:0.1.0
BASE_IMAGE ?= python:3.11-slim
DEBIAN_BASE ?= localhost/batchd-debian-python:bookworm
WHEELHOUSE := build/wheelhouse
# pytest processes of `make test`, each with its own dev server and kubesim. The run is bound by
# the two cores: 14 took as long as 10 (596-636 s against 606 s), but stretched the tests on the
# control plane 2-3 times more, past their timeouts in CI.
TEST_PROCESSES ?= 10

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,test]'
	touch $(STAMP)

venv: $(STAMP)

# Upstream's control plane for the tests' second backend and `batchd dev --kube cluster`: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok, built from their Go
# modules (hack/upstream/) into a per-machine cache, once; a line per binary with its time.
upstream: $(STAMP)
	$(BIN)/python -m worker.upstream

dev: $(STAMP)
	$(BIN)/batchd dev

# The tests write byte code even where PYTHONDONTWRITEBYTECODE is set: else each of the test
# processes, and each worker and CLI process they start, compiles batchd and rewrites the tests'
# asserts again (about 5 CPU-seconds a process). One collection writes it first. mypy runs beside
# the tests (a cold run takes 20 s of one core); its verdict and output come after theirs.
test: $(STAMP) upstream
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	rm -f $(VENV)/mypy.out; { $(BIN)/mypy > $(VENV)/mypy.out 2>&1; echo $$? >> $(VENV)/mypy.out; } & \
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider --collect-only >/dev/null 2>&1; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadgroup \
		--no-loadscope-reorder; tests=$$?; \
	wait; echo "mypy:"; sed '$$d' $(VENV)/mypy.out; typed=$$(tail -n 1 $(VENV)/mypy.out); \
	exit $$(( tests != 0 ? tests : typed ))

# tests/durations.json: the seconds each test takes in `make test`, which orders its work units
# longest first; made again after adding or lengthening a long test.
durations:
	$(MAKE) test PYTEST_ADDOPTS=--store-durations

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy

image: $(STAMP)
	rm -rf $(WHEELHOUSE)
	$(BIN)/pip wheel --quiet --wheel-dir $(WHEELHOUSE) . setuptools
	rm -f $(WHEELHOUSE)/batchd-*.whl
	buildah build --isolation chroot --layers --build-arg BASE=$(BASE_IMAGE) --build-arg PIP_NO_INDEX=1 \
		--tag $(IMAGE) .

# A Debian bookworm base with python3 and venv, from Debian's packages alone (mmdebstrap), kept
# in container storage: built once per machine.
debian-base:
	podman image exists $(DEBIAN_BASE) || { \
		mkdir -p build \
		&& mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates bookworm \
			build/debian-python-bookworm.tar \
		&& podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			build/debian-python-bookworm.tar $(DEBIAN_BASE) \
		&& rm -f build/debian-python-bookworm.tar; }

clean:
	rm -rf $(VENV) .batchd
