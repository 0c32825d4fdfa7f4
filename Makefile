# Entry points: `make demo` and `make test` (README). Everything they need is installed on first
# use and reused afterwards: the tool venv (.build/venv), the collections (.build/collections),
# the docker engine and the systemd base images (tag = hash of their recipe).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(CURDIR)
SCENARIO ?= default
# The scenario run on the oldest supported ansible-core (meta/runtime.yml), by `make molecule-floor`.
FLOOR_SCENARIO ?= default
SCENARIOS := $(notdir $(patsubst %/molecule.yml,%,$(wildcard extensions/molecule/*/molecule.yml)))

export PATH := $(ROOT)/.build/venv/bin:$(PATH)
export ANSIBLE_HOME := $(ROOT)/.build/ansible-home
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.collections:$(ROOT)/.build/collections
export XDG_CACHE_HOME := $(ROOT)/.build/xdg-cache
# Bytecode of every Python the suite runs (tool venvs, tests, tools) cached out of the tree, whatever
# the environment says: uv installs none, and compiling ansible-core afresh cost each Python that
# imports it (every ansible-playbook, molecule, pytest worker, ansible-lint) 1.3 s of CPU.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(ROOT)/.build/pycache

.PHONY: demo check test lint sanity unit package molecule molecule-all bench bench-noop bench-serving bench-converge bench-rolling bench-mlenv tools engine clean distclean help
.PHONY: tools-floor lint-floor sanity-floor unit-floor molecule-floor lock lock-check contract triton gpu-wheels parser-proof

help:
	@echo "make demo | check | test | lint | sanity | unit | package | molecule SCENARIO=<$(SCENARIOS)> | bench | clean | distclean"
	@echo "make contract: what the collection relies on in SGLang, checked in the real wheels of every supported release"
	@echo "make triton: runtime_env's Triton proof against real Triton 3.6 and CUDA 13 ptxas (no GPU)"
	@echo "make parser-proof: the argument check against the real sglang releases' parsers (torch; not in make test)"
	@echo "make gpu-wheels: the wheels the GPU scripts carry (.whl/, .gpuwheels/; docs/validation.md), from tools/gpu-wheels.lock"
	@echo "on the oldest supported ansible-core: make lint-floor | sanity-floor | unit-floor | molecule-floor FLOOR_SCENARIO=<name>"

demo: tools engine
	tools/demo.sh

tools:
	@tools/venv.sh
	@tools/collections.sh

engine:
	@tools/docker-engine.sh

# The inner loop (docs/testing.md): lint, sanity and the unit suite, everything but the scenarios.
check: lint sanity unit

lint: tools
	ansible-lint --offline

sanity: tools
	tools/sanity.sh

# Four workers on any machine: the suite mostly waits on the processes and servers it starts
# (about 50 s of CPU against 130 s serial), so it takes under half the time even on two cores.
unit: tools
	python -m pytest -p no:cacheprovider --import-mode=importlib -n 4 tests/unit

# The Galaxy tarball as users install it, its docs, the changelog fragments and the EE context.
package: tools
	tools/package-check.sh

# Each scenario says how long it took, so a slow one shows in CI's log.
molecule: tools engine
	@rc=0; molecule test -s $(SCENARIO) || rc=$$?; \
	echo "molecule: scenario $(SCENARIO) exited $$rc after $$SECONDS s"; exit $$rc

# The same checks with the floor venv (.build/venv-floor, tools/requirements-floor.txt: the oldest
# ansible-core meta/runtime.yml accepts) first on PATH and its own Ansible state, so nothing the
# newest core wrote (caches, ansible-test venvs) is reused by the oldest.
FLOOR_TARGETS := tools-floor lint-floor sanity-floor unit-floor molecule-floor
$(FLOOR_TARGETS): export PATH := $(ROOT)/.build/venv-floor/bin:$(PATH)
$(FLOOR_TARGETS): export ANSIBLE_HOME := $(ROOT)/.build/ansible-home-floor
$(FLOOR_TARGETS): export XDG_CACHE_HOME := $(ROOT)/.build/xdg-cache-floor

tools-floor:
	@tools/venv.sh floor
	@tools/collections.sh

lint-floor: tools-floor
	ansible-lint --offline

# Target Python 3.9 only: the floor's modules run on Debian 12's 3.11 in molecule-floor.
sanity-floor: tools-floor
	TOOLS_VENV=floor SANITY_TARGET_PYTHONS=3.9 tools/sanity.sh --skip-test pylint

# On the floor, the tests whose verdict can depend on ansible-core: the modules through AnsibleModule,
# the lookup's argument specs, the action and filter plugins, the roles' files, and the one module_utils
# file that imports Ansible (sglang_module: its urls). The rest (module_utils logic, the stand-in, the
# tools, the benchmarks' helpers) imports no Ansible: the same interpreter gives the same verdict,
# which `make unit` has.
FLOOR_UNIT := tests/unit/plugins/modules tests/unit/plugins/lookup tests/unit/plugins/action tests/unit/plugins/filter tests/unit/roles \
  tests/unit/plugins/module_utils/test_local_http.py
unit-floor: tools-floor
	python -m pytest -p no:cacheprovider --import-mode=importlib -n 4 $(FLOOR_UNIT)

molecule-floor: tools-floor engine
	@rc=0; molecule test -s $(FLOOR_SCENARIO) || rc=$$?; \
	echo "molecule-floor: scenario $(FLOOR_SCENARIO) exited $$rc after $$SECONDS s"; exit $$rc

# The rolling and gateway scenarios each run in a lane of their own beside everything else
# (tools/lanes.sh): a roll goes one host at a time, mostly waiting, and they are the longest; the
# rolling lane then runs ml_env and the gateway lane sglang_server, so the three lanes end near one
# another (docs/testing.md has each step's time; the gateway's TP group tests made gateway+ml_env the
# longest pair, and a fourth lane slowed every step on two cores until a timed fault case failed). `make test`
# starts the lanes first, so they use the core that the single-process checks leave idle; the
# checks, then the other scenarios (bad_input first: its checks are pure input, the quickest
# verdict), then the floor's scenario run one after another in the main lane. The floor's own
# checks are the ones whose verdict depends on the core: its sanity (no pylint: the newest
# core's is the stricter) and its unit suite; ansible-lint runs once, on the newest core.
FIRST := bad_input
BESIDE := rolling+ml_env gateway+sglang_server
BESIDE_SCENARIOS := $(subst +, ,$(BESIDE))
CHECKS := contract triton lint sanity unit package lock-check sanity-floor unit-floor
MAIN_SCENARIOS := $(foreach s,$(FIRST) $(filter-out $(FIRST) $(BESIDE_SCENARIOS),$(SCENARIOS)),"molecule SCENARIO=$(s)") molecule-floor
test: tools tools-floor engine
	@tools/test-images.sh
	@tools/lanes.sh "$(BESIDE)" $(CHECKS) $(MAIN_SCENARIOS)

molecule-all: tools tools-floor engine
	@tools/test-images.sh
	@tools/lanes.sh "$(BESIDE)" $(MAIN_SCENARIOS)

# A stack profile's lock, resolved on this machine with the tool venv's uv (README, "One lock for
# the fleet"): make lock PROFILE=name [VARS=a vars file that defines it] [DEST=path]; the
# collection's own profiles write roles/ml_env/files/locks/NAME.txt.
lock: tools
	ansible-playbook playbooks/lock.yml -e ml_env_profile=$(PROFILE) -e ml_env_uv_path=$(ROOT)/.build/venv/bin/uv \
	  $(if $(VARS),-e @$(VARS)) -e ml_env_lock_dest=$(abspath $(or $(DEST),roles/ml_env/files/locks/$(PROFILE).txt))

# What the collection relies on in SGLang (plugins/module_utils/sglang/versions.py), read in the real
# wheels of every supported release (tools/sglang-wheels.lock, cached in .build/sglang-wheels): first
# of the checks in `make test`, a few seconds once cached and the quickest verdict among them.
contract: tools
	tools/sglang-contract.sh

# runtime_env's Triton proof (tests/triton/) against the real Triton and CUDA 13 ptxas wheels of
# tools/requirements-triton.txt, in .build/venv-triton: which ptxas Triton 3.6 runs for sm_90, sm_100
# and sm_120 with the spec as the role renders it, and without TRITON_PTXAS_BLACKWELL_PATH.
triton: tools
	tools/triton-proof.sh

# The argument check against the real sglang of every supported release (tests/sglang_parser/), in
# .build/venv-sglang-VERSION from tools/requirements-sglang-VERSION.txt (torch included, about 4 GB each):
# the stand-in's parser has the real options, and both judge the same words alike. Not part of `make test`.
parser-proof: tools
	tools/sglang-parser-proof.sh

# Real resolutions against PyPI: the CI profile's committed lock is what its pins resolve to today,
# and the PyPI equivalent of the field-notes stack keeps its five pins under the role's resolver.
lock-check: tools
	tools/lock-check.sh

# The wheels tests/gpu/run_*.sh carry to the GPU host, which has no network (docs/validation.md,
# "Carried wheels"): .whl/ (ansible-core and its dependencies, uv) and .gpuwheels/ (the stand-in's
# wheel and tests/gpu/sglang.yml's pins), emptied first, every download pinned with its hash in
# tools/gpu-wheels.lock. Needs PyPI; not part of `make test`.
gpu-wheels: tools
	tools/gpu-wheels.sh

# Benchmarks (not tests): each writes its figures into docs/benchmarks.md.
bench: bench-serving bench-converge bench-rolling bench-mlenv bench-noop

bench-serving: tools engine
	python bench/serving_wait.py

bench-converge: tools engine
	python bench/converge.py

# Serial 1 against 2 (figure 5), then a roll's own cost per node: per role against every role.
bench-rolling: tools engine
	python bench/rolling_serial.py
	python bench/rolling_overhead.py

bench-noop: tools engine
	python bench/noop_converge.py

# In a demo host (tools/demo.sh starts it when it is not up): uv against pip, and the role's re-run.
bench-mlenv: tools engine
	python bench/mlenv_build.py

clean:
	-tools/demo.sh --destroy
	-docker ps -aq --filter name=inferops-bench- | xargs -r docker rm -f >/dev/null
	rm -rf .build tests/output

distclean: clean
	-docker image ls -q 'inferops-gpu/base' | xargs -r docker image rm
