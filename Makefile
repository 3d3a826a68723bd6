# Two commands do all the set-up on a fresh machine:
#   make demo   # creates .venv, installs torch==2.13.0 (pinned) and this package, runs the demo
#   make test   # same set-up, then a few minutes of tests touching every feature
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# constraints.txt pins torch: nothing here can resolve an unpinned (CUDA) torch.
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: install bytecode demo test test-ci test-all lint docs screenshots bench-smoke clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# pip byte-compiles a package it installs, but not an editable one, and where PYTHONDONTWRITEBYTECODE
# is set (as on these machines) no process writes its own: every process that imported the package
# compiled its 100 modules from source again (0.3 s). Compiled here, only what changed since.
bytecode: $(STAMP)
	$(PY) -m compileall -q instrumented_backend minifier benchmarks examples tests

demo: $(STAMP) bytecode
	$(PY) examples/tutorial_capture.py
	$(PY) examples/neg_compile_error.py
	$(PY) examples/neg_accuracy.py
	$(PY) -m instrumented_backend diagnose --fault doubling_neg examples/tutorial_model.py || test $$? -eq 1

# Two worker processes, each test module whole on one of them (its module-scoped compiles are
# built once): on a 2-core VM the run took 1026 s against 1441 s in one process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

# make test: every feature touched in a few minutes (tests/quick.txt); make test-ci: every test not
# marked slow, as CI runs it; make test-all: every test.
QUICK_TESTS := $(shell grep -v '^\#' tests/quick.txt)

test: $(STAMP) bytecode
	$(PYTEST) $(QUICK_TESTS)

# CI runs the Triton cases too (tests/test_triton_cpu.py): the triton extra, about 1 GB installed.
TRITON_STAMP := $(VENV)/.triton-stamp
$(TRITON_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[test,triton]"
	touch $(TRITON_STAMP)

test-ci: $(STAMP) $(TRITON_STAMP) bytecode
	$(PYTEST)

lint: $(STAMP)
	$(PY) -m ruff check instrumented_backend minifier tests benchmarks examples

# The documentation site (docs/, mkdocs.yml) into site/, every warning an error.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict --quiet

# The README's and the docs' pictures of the HTML report: the browser tests' own screenshots,
# taken again into docs/images/ (needs Debian's chromium and chromium-driver).
screenshots: $(STAMP)
	IB_ARTIFACTS=docs/images IB_REQUIRE_BROWSER=1 $(PY) -m pytest -q tests/test_html_report.py \
		-k "clicking_the_neg_kernel_line or diagnose_report_opens"

test-all: $(STAMP) $(TRITON_STAMP) bytecode
	$(PYTEST) -m "slow or not slow"

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache site
