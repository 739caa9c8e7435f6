# Two commands: `make demo` (set up, then run the demo pipeline on the bundled drive) and
# `make test` (set up, then run the test suite). Both are idempotent: setup steps are stamped.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
BENCH_STAMP := $(VENV)/.stamp-bench
APT_PACKAGES := libusb-1.0-0 libvulkan1 mesa-vulkan-drivers libgl1 libglib2.0-0 libgomp1 \
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user prometheus linux-perf
DEMO_OUT := runs/demo

.PHONY: demo test setup system-deps node-client bench profile-pictures clean

# The demo: camera YOLOv8 + LiDAR PointPillars (the project's trained demo models) + fusion on the
# bundled drive at its recorded speed (10 Hz); prints per-frame detections, the latency table and
# where the pictures went, then how to run the CLI yourself. --rt-fifo: the run's threads take a core when their frame is ready
# instead of queueing behind the machine's other work (a warning where the OS refuses it).
demo: setup
	$(BIN)/cuvil-perception run configs/fusion.yaml --replay datasets/sample_drive --rate 1 \
		--rt-fifo 10 --out $(DEMO_OUT)/detections.jsonl --summary --viz $(DEMO_OUT)/pictures
	@echo
	@echo "The CLI is installed in $(VENV): $(BIN)/cuvil-perception --help"
	@echo "  (or 'source $(BIN)/activate' once, then: cuvil-perception --help)."
	@echo "Try: $(BIN)/cuvil-perception run configs/fusion.yaml --set yolo.conf=0.4 --viz runs/mine"

test: setup node-client
	$(BIN)/python -m pytest -q

# benchmarks also install the `bench` extra (numba, the anchor of benchmarks/vs_numba.py and
# numba_pillarize.py; both print a message and skip without it)
bench: setup $(BENCH_STAMP)
	for script in benchmarks/*.py; do case $$script in */_*) continue;; esac; \
		echo "== $$script"; $(BIN)/python $$script || exit 1; done

setup: system-deps $(STAMP)

# The two pictures of docs/profiling.md, recorded on the bundled drive with the commands the page
# shows (500 Hz: fine enough to catch the 1 % kernels in five runs); tests/test_profile.py runs
# the same recordings and checks the committed pictures.
PROFILE_OUT := runs/profile-pictures
profile-pictures: setup
	$(BIN)/cuvil-perception profile configs/lidar_pillars.yaml --replay datasets/sample_drive \
		--hz 500 --repeat 5 --out $(PROFILE_OUT)/one --overwrite
	$(BIN)/cuvil-perception profile configs/lidar_pillars.yaml --replay datasets/sample_drive \
		--set detect.sparse=false --vs-set detect.sparse=true --hz 500 --repeat 5 \
		--out $(PROFILE_OUT)/ab \
		--overwrite
	mkdir -p docs/img
	cp $(PROFILE_OUT)/one/flamegraph.svg docs/img/profile_lidar_pillars.svg
	cp $(PROFILE_OUT)/ab/diff.svg docs/img/profile_dense_vs_sparse.svg

# Foxglove's own npm client (@foxglove/ws-protocol on ws, versions pinned in its package-lock),
# the independent client tests/test_foxglove_live.py runs against the live view; skipped
# (and that test with it) where Node.js is not installed.
NODE_CLIENT := tests/foxglove_client
node-client:
	@if command -v npm >/dev/null 2>&1; then \
		test -d $(NODE_CLIENT)/node_modules/@foxglove/ws-protocol || \
		(cd $(NODE_CLIENT) && npm ci --no-audit --no-fund --silent); \
	else echo "node-client: no npm here; tests/test_foxglove_live.py skips its npm-client test"; fi

# Open3D needs libusb at import time and Vulkan + Mesa for offscreen rendering; `compile --library`
# links aarch64 libraries with the cross gcc, and tests run them under qemu-user; prometheus
# gives promtool (tests/test_rt_metrics.py checks every scrape and the Grafana dashboard's
# queries with it) and the server benchmarks/prometheus_scrape.py runs; linux-perf is `profile
# --profiler perf`'s sampler (py-spy, the default one, comes from PyPI with the dev extra).
system-deps:
	@missing=""; for pkg in $(APT_PACKAGES); do \
		dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		log=$$(mktemp); \
		{ $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
			-y -qq --no-install-recommends $$missing; } >$$log 2>&1 || { cat $$log; exit 1; }; \
		rm -f $$log; \
	fi

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $(BENCH_STAMP)

clean:
	rm -rf $(VENV) runs .pytest_cache $(NODE_CLIENT)/node_modules
