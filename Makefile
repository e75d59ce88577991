# lobreplay -- the two commands: `make demo` and `make test`.
PY ?= python3.11
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
N ?= 100000000
SEED ?= 1

.PHONY: demo test dev fuzz asan bench clean

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

# Editable install with the test extras; re-run after editing C (the stamp
# depends on the C sources and the build script).
$(STAMP): $(VENV)/bin/python pyproject.toml setup.py csrc/*.c csrc/*.h csrc/build_core.py
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

dev: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/lobreplay demo

test: $(STAMP)
	$(VPY) -m pytest -q

fuzz: $(STAMP)
	$(VPY) -m lobreplay.fuzz --commands $(N) --seed $(SEED)

clean:
	rm -rf build *.egg-info lobreplay/_core*.so lobreplay/_core.c lobreplay/_core.o
