# The habits: `make demo`, `make test`, `make lint`, `make bench`.
# Everything installs itself into .venv from pinned versions; nothing is needed beforehand but
# Python >= 3.11, git and make (seqkit / minimap2 for the comparison tests come from apt-get when run as root).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml localcloud/pyproject.toml constraints.txt scripts/install_mappy.py scripts/mappy/* | cksum | cut -d' ' -f1)
# two installs: the `local` extra (what `make demo` needs: the app and its local cloud) and the `dev` extra (the
# tests' and linters' packages besides); a dev install is a local one too, so it leaves both stamps
STAMP  := $(VENV)/.installed-$(HASH)
LOCAL_STAMP := $(VENV)/.installed-local-$(HASH)

.PHONY: help setup demo test test-fast test-repeat lint layer-size bench profile tools docs clean fuzz grants moto-check patch-removal
.PHONY: container-tools image debian-packages aws-tools suite lint-beside image-beside lock

help:
	@echo "make demo   - set up the app and its local cloud (the local extra), then run it over bundled data"
	@echo "make test   - set up, install seqkit/minimap2/chromium (Debian), lint, run the test suite"
	@echo "make lint   - import rules (no circle, layers, the local cloud a component), ruff, mypy, sam validate --lint, asl-validator, checkov, the layers' size"
	@echo "make test-repeat - the local cloud's process and memory tests REPEAT (10) times; names any that failed once"
	@echo "make fuzz   - fuzz the readers for FUZZ_MINUTES (10); failing inputs are kept in tests/data/fuzz"
	@echo "make bench  - side-by-side benchmarks vs seqkit, fastp, minimap2 (writes BENCHMARKS.md)"
	@echo "make profile - where each benchmark row's CPU goes, by library (perf; after make bench)"
	@echo "make image  - build the worker image with podman (Batch children as containers: --containers)"
	@echo "make grants - each IAM grant needed: every role statement removed in turn on the local cloud (writes docs/GRANTS.md)"
	@echo "make moto-check - which of the local cloud's moto patches the newest moto on PyPI still needs (a scratch venv)"
	@echo "make lock   - rewrite constraints.txt (every installed version) from a fresh install of pyproject.toml's pins"
	@echo "make patch-removal - each moto patch removed in turn: its tests must fail (a pytest process per patch)"

# uv installs the venvs (the project's, the linters'): pip's resolver and serial downloads took 3-4 min of
# `make test`'s 20 on a 2-core machine, uv ~20 s. Itself installed once by pip into a venv of its own,
# at scripts/uv.txt's pin (the worker image's build reads it too).
UV_DIR := .tools/uv
UV := $(UV_DIR)/bin/uv
UV_STAMP := $(UV_DIR)/.installed-$(shell cat scripts/uv.txt | cksum | cut -d' ' -f1)
# uv reads the system's certificate store, as pip does (a TLS-intercepting proxy's CA)
export UV_NATIVE_TLS := 1
# The installs' download caches (uv, pip, npm) in the clone, not the user's home: a clean clone's make test writes
# nothing outside it but the system's packages (apt-get, podman's image store) and the temporary folder. A cache
# set in the environment wins (a developer's shared one).
CACHE := $(CURDIR)/.tools/cache
export UV_CACHE_DIR ?= $(CACHE)/uv
export PIP_CACHE_DIR ?= $(CACHE)/pip
export npm_config_cache ?= $(CACHE)/npm

$(UV_STAMP):
	rm -rf $(UV_DIR) && $(PYTHON) -m venv $(UV_DIR)
	$(UV_DIR)/bin/pip install --quiet --disable-pip-version-check -r scripts/uv.txt  # its pin
	touch $@

# $(1): the extra to install (the local cloud, localcloud/, is this repository's own distribution: installed
# editable beside seqlake, as the `local` extra names it). mappy's compile (one core, ~1 min: scripts/install_mappy.py) runs beside the
# install of everything else (scripts/uv-excludes.txt keeps mappy out of uv's resolution, so that the two never
# write the same distribution)
define install
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "seqlake needs Python >= 3.11"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python scripts/install_mappy.py & mappy=$$!; \
	  $(UV) pip install --quiet --python $(BIN)/python -c constraints.txt --excludes scripts/uv-excludes.txt \
	    -e localcloud -e '.[$(1)]' || { wait $$mappy; exit 1; }; \
	  wait $$mappy
endef

$(STAMP): $(UV_STAMP)
	$(call install,dev)
	rm -f $(VENV)/.installed-* && touch $@ $(LOCAL_STAMP)

# a venv with the dev extra installed holds the local one already
$(LOCAL_STAMP): $(UV_STAMP)
ifneq ($(wildcard $(STAMP)),)
	touch $@
else
	$(call install,local)
	rm -f $(VENV)/.installed-local-* && touch $@
endif

setup: $(STAMP)

# the demo needs the app and its local cloud only (the `local` extra), not the tests' and linters' tools
demo: $(LOCAL_STAMP)
	$(BIN)/seqlake demo

# seqkit, minimap2, samtools, ivar and fastp are the tools whose numbers the tests compare against (ivar: the
# variants and consensus); tabix brings bgzip (the BGZF input tests) and tabix (the VCF index test); bcftools
# reads the VCF index's record count; Chromium opens the run reports in the browser tests. Tests skip without them.
TOOLS := seqkit minimap2 samtools ivar fastp tabix bcftools chromium time
tools:
	@missing=""; for t in $(TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	[ -z "$$missing" ] || \
	  { if [ "$$(id -u)" = 0 ]; then \
	      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "warning: could not install$$missing; their tests will skip"; \
	    else echo "note: not root: tests that need$$missing skip unless installed"; fi; }

# Two steps, each with its parts side by side: (1) the project's venv (uv; mappy's compile: one core) beside
# the linters' own venvs and the Debian packages (apt-get takes one at a time: one job, in turn); (2) the suite
# beside the linters at a lower priority (the suite is the longer: lint takes the CPU its two workers leave) and
# the worker image (mostly waits: Debian's base, the downloads inside the build; on a fresh machine it took
# longer than the venv, the suite waiting on it). The suite runs its longest tests first (tests/conftest.py);
# the container tests, later in that order, wait for the image's build to end (IMAGE_DONE: its exit status).
IMAGE_DONE := $(CURDIR)/.tools/worker-image.done
test:
	@+$(MAKE) --no-print-directory -j3 --output-sync=target setup aws-tools debian-packages
	@rm -f $(IMAGE_DONE)
	@+SEQLAKE_IMAGE_BUILD_DONE=$(IMAGE_DONE) $(MAKE) --no-print-directory -j3 --output-sync=target \
	  lint-beside suite image-beside

# the suite (make test builds the worker image beside it: its container tests run it); after a green run it writes
# its twenty slowest tests into README.md's development section (tests/slowest_tests.py: only when they moved);
# `tests` named: pytest knows the option tests/conftest.py adds only when it is given the folder
suite: $(STAMP)
	$(BIN)/python -m pytest $(SUITE_ARGS) -q --slowest-into README.md tests

# the local cloud's process and memory tests REPEAT times, one run after the other; names every test that failed
# in any run (a flaky test passes most single runs). REPEAT_TESTS=tests/local repeats all the local cloud's tests
REPEAT ?= 10
REPEAT_TESTS ?= tests/local/test_batch.py tests/local/test_memory.py tests/local/test_launcher.py \
	tests/local/test_forkserver.py tests/local/test_lambdas.py
test-repeat: $(STAMP)
	$(BIN)/python -m tests.repeat --times $(REPEAT) $(REPEAT_TESTS)

# the worker image where podman works (elsewhere the container tests skip, naming why), beside the suite; its
# end (the build's exit status) written to IMAGE_DONE whatever it was, so that no test waits for ever. The
# image's tag is computed from the checkout by $(PYTHON) itself (PYTHONPATH=src:localcloud/src: seqlake.local.image
# and what it imports, localcloud.containers and localcloud.contract, import nothing from the venv)
image-beside: container-tools
	@mkdir -p $(dir $(IMAGE_DONE)); \
	  PYTHON=$(PYTHON) PYTHONPATH=$(CURDIR)/src:$(CURDIR)/localcloud/src scripts/build-worker-image.sh --if-possible; \
	  status=$$?; \
	  echo $$status > $(IMAGE_DONE); exit $$status

lint-beside: $(STAMP)
	@nice -n 10 $(MAKE) --no-print-directory lint

# how the suite is spread over two processes: tests sharing an expensive fixture (a local cloud, a module's runs)
# in one of them (GROUPS and the scheduler in tests/conftest.py); the queue in the collection's order (the longest first)
SUITE_ARGS := -n 2 --dist loadgroup --no-loadscope-reorder

# the Debian packages the suite uses, one apt-get after the other
debian-packages:
	@+$(MAKE) --no-print-directory tools
	@+$(MAKE) --no-print-directory container-tools

# the linters' pinned tools in venvs of their own (scripts/lint-aws.sh), independent of the project's venv
aws-tools: $(UV_STAMP)
	UV=$(CURDIR)/$(UV) scripts/lint-aws.sh --install

# podman, runc and debootstrap: the worker image and container mode; the container tests skip without them.
container-tools:
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null || \
	  { if [ "$$(id -u)" = 0 ]; then \
	      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null) \
	      || echo "warning: could not install podman/runc/debootstrap; the container tests will skip"; \
	    else echo "note: not root: the container tests skip unless podman works and the image is built"; fi; }

# the worker image (scripts/build-worker-image.sh: a Debian base made once and cached, then the Dockerfile)
image: $(STAMP) container-tools
	scripts/build-worker-image.sh

# the readers' fuzz targets (tests/fuzz/run.py) taking turns for FUZZ_MINUTES in all, at low priority; every
# failing input is kept in tests/data/fuzz/, which make test replays (tests/fuzz/test_corpus.py)
FUZZ_MINUTES ?= 10
fuzz: $(STAMP)
	nice -n 15 $(BIN)/python -m tests.fuzz.run --minutes $(FUZZ_MINUTES) --stats fuzz-stats.json

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(SUITE_ARGS) -q -x

lint: $(STAMP)
	$(BIN)/python scripts/import_rules.py
	$(BIN)/ruff check src tests functions bench localcloud
	$(BIN)/ruff check containers/worker && $(BIN)/mypy containers/worker/entrypoint.py
	$(BIN)/mypy
	$(BIN)/python -m seqlake.aws.render_template --check
	$(BIN)/python -m seqlake.aws.permissions --check
	$(BIN)/python -m seqlake.local.instance_data --check
	$(BIN)/python -m localcloud.rules --check
	scripts/lint-aws.sh
	$(BIN)/python scripts/layer_size.py $(BIN)/python

# each moto patch removed in turn: its tests must fail without it (tests/local/test_patch_registry.py; a pytest
# process per patch, too long for the suite: run it after a change to a patch or to moto's pin)
patch-removal: $(STAMP)
	SEQLAKE_PATCH_REMOVAL=1 $(BIN)/python -m pytest tests/local/test_patch_registry.py -q -n 2

# Each grant needed: every statement of every role of the deployed template removed in turn on the local cloud
# (IAM enforced) and the smallest runs that need it run; fails on a statement no run needs whose reason is not
# written in seqlake/local/grants.py. About 20 s per statement (too long for the suite): run it after a
# change to a role, and before a release.
grants: $(STAMP)
	$(BIN)/python -m seqlake.local.grants --report docs/GRANTS.md

# the Lambda layers built as `sam build` builds them; each function's layers measured unzipped (fails above 172 MiB)
layer-size: $(STAMP)
	$(BIN)/python scripts/layer_size.py $(BIN)/python

# BENCH_ARGS: options of bench/run.py, e.g. make bench BENCH_ARGS="--skip e2e,shards"
bench: $(STAMP) tools
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# where each seqlake row's CPU goes, by library (perf; on what the last `make bench` left in bench/work)
profile: $(STAMP)
	$(BIN)/python bench/profile.py $(PROFILE_ARGS)

docs: $(STAMP)
	$(BIN)/python -m seqlake.lake.tables --markdown > docs/TABLES.md
	$(BIN)/python -m localcloud.moto_check --write-upstream docs/moto-upstream.md

# the newest moto on PyPI (MOTO_CHECK_VERSION=x.y.z for another) in a scratch virtualenv, unpatched: one line per
# registered patch, needed / gone / review (localcloud/src/localcloud/patch_registry.py; docs/LOCAL_CLOUD.md)
moto-check:
	PYTHON=$(PYTHON) scripts/moto-check.sh

# constraints.txt rewritten from a fresh install of pyproject.toml's pins (the newest releases they allow);
# run make test after it
lock:
	$(PYTHON) scripts/lock.py

clean:
	rm -rf $(VENV) .seqlake .pytest_cache .mypy_cache .ruff_cache
