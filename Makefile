# Set-up and the everyday jobs. Everything pip installs comes from a lock in locks/ (pinned by
# `make lock` from pyproject.toml, agent2rl_tui/util/locks.py): the same packages on every machine.
#   make demo   the core packages (CPU torch where there is no NVIDIA GPU), then the demo
#   make test   the rest (dev tools, vLLM, ALFWorld, the agent CLIs, bubblewrap, chromium, Slurm), then the suite
#   make bench  every benchmark in bench/, with its figures
#   make lock   the locks again, after a change to pyproject.toml or locks/agent-clis/package.json
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install flavour: nvidia (CUDA torch, vLLM) where nvidia-smi is found, cpu (CPU torch, vLLM's CPU build) elsewhere.
FLAVOUR ?= $(if $(shell command -v nvidia-smi 2>/dev/null),nvidia,cpu)
LOCK := locks/$(FLAVOUR).txt
DEMO_LOCK := locks/$(FLAVOUR)-demo.txt
# The venv's bin first on PATH: a package whose build calls a bare `python` (fast-downward-textworld, which
# ALFWorld needs) gets the venv's; pyenv's, run inside pip's isolated build environment, found no standard library.
PIP_LOCKED := PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pip install -q --disable-pip-version-check --no-deps
lock_failed = echo "error: pip could not install $(1)'s pins. The locks are for CPython 3.11 on x86_64 Linux; \
the cpu flavour's torch==2.13.0+cpu comes from PyTorch's CPU index where pip finds no such wheel: \
PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make $(MAKECMDGOALS)" >&2; exit 1
# Test workers: one per core and one more (at most 4), since the Slurm tests' worker mostly waits on jobs.
TEST_WORKERS := $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 1)); [ $$n -gt 4 ] && n=4; echo $$n)
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
CAN_APT := [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq >/dev/null

.PHONY: setup demo-setup agent-clis demo test test-fast test-unit bench lock clean
demo-setup: $(VENV)/.core
setup: $(VENV)/.installed

# The demo's packages: core only, from the demo lock (a subset of the full lock, same versions).
# Containment of the agent needs bubblewrap (docs/containment.md): installed here where root and
# apt-get are at hand; elsewhere a note says how, and runs start "not contained" until it is.
$(VENV)/.core: $(DEMO_LOCK) pyproject.toml
	@command -v bwrap >/dev/null || { $(CAN_APT) && $(APT_GET) bubblewrap >/dev/null; } || \
		echo "note: bubblewrap is not installed; agents will run NOT CONTAINED until it is: sudo apt install bubblewrap"
	$(PYTHON) -m venv $(VENV)
	$(PIP_LOCKED) -r $(DEMO_LOCK) || { $(call lock_failed,$(DEMO_LOCK)); }
	$(PIP_LOCKED) --no-build-isolation -e .
	touch $@

# Everything else: the full lock (dev tools, vLLM, ALFWorld, which compiles fast-downward and jericho),
# and the machine's parts the suite uses, from Debian where root and apt-get are at hand: chromium
# (the HTML report's browser tests) and Slurm (tests/support/slurm_cluster.py starts its own one-node cluster).
# `agent2rl-tui doctor` says what works and what does not.
$(VENV)/.installed: $(LOCK) $(VENV)/.core
	@command -v chromium >/dev/null || { $(CAN_APT) && $(APT_GET) chromium >/dev/null; } || \
		echo "note: chromium is not installed; the HTML report's browser tests need it: sudo apt install chromium"
	@PATH="$$PATH:/usr/sbin:/sbin" command -v slurmctld >/dev/null && PATH="$$PATH:/usr/sbin:/sbin" command -v munged >/dev/null || \
		{ $(CAN_APT) && $(APT_GET) slurmctld slurmd slurm-client munge >/dev/null; } || \
		echo "note: Slurm is not installed; the real-Slurm tests need it: sudo apt install slurmctld slurmd slurm-client munge (and run them as root)"
	$(PIP_LOCKED) -r $(LOCK) || { $(call lock_failed,$(LOCK)); }
	touch $@

# The agent CLIs the suite runs for real (tests/system/test_agent_clis.py), into .agent-clis/: the four npm
# CLIs, every package pinned by locks/agent-clis/package-lock.json (about 40 s and 1.3 GB), and the
# OpenHands CLI, a Python 3.12 program, in a venv of its own from locks/openhands.txt (about 2 min and
# 800 MB). The caches of npm and pip make a reinstall quicker. What cannot install says so; the tests
# that need it say how to install it (and fail under CI).
AGENT_CLIS := .agent-clis
PYTHON312 = $$(for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	$$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo $$p; break; }; done)
agent-clis: $(AGENT_CLIS)/.installed $(AGENT_CLIS)/openhands/.installed
$(AGENT_CLIS)/.installed: locks/agent-clis/package.json locks/agent-clis/package-lock.json
	@if ! command -v npm >/dev/null; then \
		echo "note: npm is not installed; the agent CLI tests need it (install Node.js 20+ and npm, then make agent-clis)"; \
	else \
		mkdir -p $(AGENT_CLIS) && cp locks/agent-clis/package.json locks/agent-clis/package-lock.json $(AGENT_CLIS)/ && \
		npm install --prefix $(AGENT_CLIS) --no-fund --no-audit --loglevel=error && touch $@ || \
		echo "note: the agent CLIs did not install (make agent-clis to try again)"; \
	fi
$(AGENT_CLIS)/openhands/.installed: locks/openhands.txt
	@py=$(PYTHON312); if [ -z "$$py" ]; then \
		echo "note: OpenHands needs Python 3.12, which is not found; its test needs it (install python3.12, then make agent-clis)"; \
	else \
		rm -rf $(AGENT_CLIS)/openhands && $$py -m venv $(AGENT_CLIS)/openhands && \
		$(AGENT_CLIS)/openhands/bin/pip install -q --disable-pip-version-check --no-deps -r locks/openhands.txt && touch $@ || \
		echo "note: OpenHands did not install (make agent-clis to try again)"; \
	fi

demo: demo-setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/agent2rl-tui demo

# Test files spread over up to 4 worker processes: most tests wait on real processes and servers,
# so two cores run the suite in about 60% of the time of one. The tiers (docs/testing.md): `make test`
# runs all three (the README's command, CI's); `make test-fast` the unit and integration tiers, for the
# loop of a change (no Slurm, npm CLIs, vLLM, chromium, installs, benchmarks or type checker);
# `make test-unit` the unit tier alone (in-process, no torch).
# Bytecode caches on for the suite whatever the shell says: it starts some 2,000 Python processes, and with
# PYTHONDONTWRITEBYTECODE set each compiled the package's modules again and every worker rewrote every test
# module's asserts anew (a file of whole runs, test_lifecycle and test_revisions: 46 s of CPU, 34 s with caches).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: setup agent-clis
	$(PYTEST) tests

test-fast: setup
	$(PYTEST) tests/unit tests/integration

test-unit: setup
	$(PYTEST) tests/unit

# Every benchmark, at its full sizes; the suite runs each with --quick (tests/system/test_bench.py).
bench: setup
	@set -e; for script in bench/*.py; do echo "== $$script"; HF_HUB_OFFLINE=1 $(BIN)/python $$script; done

# uv resolves the locks (the full lock's uv, or a throwaway one where there is no venv yet); npm the agent CLIs'.
lock:
	@[ -x $(BIN)/uv ] || { $(PYTHON) -m venv .venv-lock && .venv-lock/bin/pip install -q --disable-pip-version-check \
		"$$(grep -m1 '^uv==' locks/cpu.txt || echo uv)"; }
	PATH="$(CURDIR)/$(BIN):$(CURDIR)/.venv-lock/bin:$$PATH" $(PYTHON) -m agent2rl_tui.util.locks compile
	@# npm writes a lock that `npm ci` refuses for OpenCode's per-platform packages; `npm install` reads it as is.
	tmp=$$(mktemp -d) && cp locks/agent-clis/package.json $$tmp/ && \
		npm install --prefix $$tmp --no-fund --no-audit --loglevel=error >/dev/null && \
		cp $$tmp/package-lock.json locks/agent-clis/ && rm -rf $$tmp

clean:
	rm -rf $(VENV) .venv-lock build *.egg-info .pytest_cache $(AGENT_CLIS)
