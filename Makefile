# Entry points: `make demo` and `make test` (README). Everything they need is installed on first
# use and reused afterwards: the tool venv (.build/venv), the collections (.build/collections),
# the docker engine and the systemd base image (tag = hash of its recipe).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROOT := $(CURDIR)
SCENARIO ?= harness
SCENARIOS := $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

export PATH := $(ROOT)/.build/venv/bin:$(PATH)
export ANSIBLE_HOME := $(ROOT)/.build/ansible-home
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.collections:$(ROOT)/.build/collections
export XDG_CACHE_HOME := $(ROOT)/.build/xdg-cache
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test lint sanity unit molecule molecule-all tools engine clean distclean help

help:
	@echo "make demo | test | lint | sanity | unit | molecule SCENARIO=<$(SCENARIOS)> | clean | distclean"

demo: tools engine
	tools/demo.sh

test: lint sanity unit molecule-all

tools:
	@tools/venv.sh
	@tools/collections.sh

engine:
	@tools/docker-engine.sh

lint: tools
	ansible-lint --offline

sanity: tools
	tools/sanity.sh

unit: tools
	python -m pytest -p no:cacheprovider --import-mode=importlib tests/unit

molecule: tools engine
	INFEROPS_BASE_IMAGE=$$(tools/base-image.sh) molecule test -s $(SCENARIO)

molecule-all: tools engine
	@for s in $(SCENARIOS); do $(MAKE) --no-print-directory molecule SCENARIO=$$s; done

clean:
	-tools/demo.sh --destroy
	rm -rf .build tests/output

distclean: clean
	-docker image ls -q 'inferops-gpu/base' | xargs -r docker image rm
