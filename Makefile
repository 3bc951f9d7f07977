# ctrlscope: two commands from a fresh clone — `make demo` and `make test`.
# Both create or refresh .venv from requirements.txt (exact pins) before doing anything else.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements.stamp

.PHONY: demo test lint bench venv clean

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

demo: venv
	CTRLSCOPE_DEMO=1 $(BIN)/python manage.py demo

lint: venv
	$(BIN)/ruff check controllers dashboard tests bench
	$(BIN)/lint-imports --config .importlinter

# pytest exits 5 when it collected nothing: that is a failure here, never a pass.
test: venv lint
	CTRLSCOPE_DEMO=1 $(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# Each benchmark prints a table comparing ctrlscope with a named peer measured in the same run.
bench: venv
	$(BIN)/python bench/transport.py
	$(BIN)/python bench/workqueue.py
	$(BIN)/python bench/informer.py
	$(BIN)/python bench/simcluster.py
	$(BIN)/python bench/ui.py

clean:
	rm -rf $(VENV) run artifacts
