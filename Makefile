# lobreplay -- the two commands: `make demo` and `make test`.
PY ?= python3.11
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
N ?= 100000000
SEED ?= 1

.PHONY: demo test test-fast test-browser dev fuzz asan dist bench-core bench-hdr bench-itch bench-itch-full bench clean

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

# Editable install with the test extras; re-run after editing C (the stamp
# depends on the C sources and the build script).
$(STAMP): $(VENV)/bin/python pyproject.toml setup.py csrc/*/*.c csrc/*/*.h csrc/build_core.py csrc/cdef.py
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

dev: $(STAMP)

# The bundled sample day, then the real 09:30 capture bundled in data/real/itch (data/real/itch/PROVENANCE.md).
REAL_CAPTURE = data/real/itch/nasdaq_20230822_0930_moldudp64.pcap
demo: $(STAMP)
	$(VENV)/bin/lobreplay itch replay data/sample_day.itch.gz -o out/demo --date 2019-12-30 --force --no-progress
	@echo
	$(VENV)/bin/lobreplay itch replay $(REAL_CAPTURE) -o out/demo-0930 --force --no-progress

# Everything but the browser test; prints the ten slowest tests and how long it took.
# `make test-fast` leaves out the tests marked slow (about a minute).
test: $(STAMP)
	@start=$$(date +%s); $(VPY) -m pytest -q -n 2 -m "not browser" --durations=10; rc=$$?; \
	  echo "make test: $$(( $$(date +%s) - start )) s of tests, exit $$rc"; exit $$rc

test-fast: $(STAMP)
	$(VPY) -m pytest -q -n 2 -m "not browser and not slow"

# The HTML viewer loaded in headless Chromium (Debian's chromium; installed here
# when missing and apt is usable, as in .ci/run).
test-browser: $(STAMP)
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	$(VPY) -m pytest -q -m browser

# The core built with ASan + UBSan, loaded in place of the installed one, over
# the core tests, the differential fuzz and the L2 replay's C paths (depth samples,
# update ids, malformed records, outputs that run out of room, a message longer than
# the limit of one, held across chunks, bookTicker ids that land inside the history, a
# full history dropping one of two tickers with one id), the Binance decoder of the JSONL
# conversion and the sync machine (against its reference); then the ITCH day generator (csrc/tools/itch_synth.c)
# and the ITCH first pass (csrc/feeds/itch.c's scan and its order map, against the naive scan).
ASAN_SO = build/asan/lobreplay/_core*.so
asan: $(STAMP)
	rm -rf build/asan
	LOBREPLAY_SANITIZE=1 LOBREPLAY_WERROR=1 $(VPY) csrc/build_core.py build/asan >/dev/null
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	LOBREPLAY_CORE=$$(ls $(ASAN_SO)) \
	$(VPY) -m pytest -q -p no:cacheprovider tests/core/test_layout.py tests/core/test_core.py tests/core/test_differential.py \
		tests/l2/test_l2replay.py tests/l2/test_l2_differential.py tests/binance/test_binance_decode.py tests/binance/test_binance_sync.py \
		-k "(not test_l2replay and not test_l2_differential) or tiny_outputs or long_unfinished or interleaved or full_history or longer_than_max_message"
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	LOBREPLAY_CORE=$$(ls $(ASAN_SO)) \
	$(VPY) -m pytest -q -p no:cacheprovider tests/itch/test_itch_synth_fast.py -k "same_seed or gzip or planted or rejects"
	LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	LOBREPLAY_CORE=$$(ls $(ASAN_SO)) \
	$(VPY) -m pytest -q -p no:cacheprovider tests/itch/test_itch_scan.py

# sdist + wheel from a clean tree, as a user would build them.
dist: $(STAMP)
	rm -rf dist
	$(VPY) -m build --outdir dist . >/dev/null
	@ls dist
	$(VPY) -c "import sys, zipfile, glob; names = zipfile.ZipFile(glob.glob('dist/*.whl')[0]).namelist(); \
	  need = ['lobreplay/itch/replay.py', 'lobreplay/binance/sync.py', 'lobreplay/l2/lobc.py']; \
	  miss = [n for n in need if n not in names]; sys.exit(f'wheel lacks {miss}' if miss else 0)"
	@# the real fixtures (data/real, ~9 MB) are for the tests: neither the sdist nor the wheel ships them
	$(VPY) -c "import sys, tarfile, zipfile, glob; \
	  names = tarfile.open(glob.glob('dist/*.tar.gz')[0]).getnames() + zipfile.ZipFile(glob.glob('dist/*.whl')[0]).namelist(); \
	  real = [n for n in names if '/data/real/' in '/' + n]; sys.exit(f'dist ships test fixtures: {real[:3]}' if real else 0)"

fuzz: $(STAMP)
	$(VPY) tests/fuzzgen.py --commands $(N) --seed $(SEED)

# The core on the seed workload against a textbook book (benchmarks/RESULTS.md).
bench-core: $(STAMP)
	PY=$(VPY) bash benchmarks/run_core.sh

# The core's latency suite: eight scenarios one operation per call, HdrHistogram .hgrm files,
# allocation counts, open loop (benchmarks/RESULTS.md); outputs in benchmarks/build/hdr/.
bench-hdr: $(STAMP)
	$(VPY) benchmarks/bench_hdr.py

# ITCH decode and replay on generated days (benchmarks/RESULTS.md); SIZES=5,50 adds a 50M-message day.
SIZES ?= 5
bench-itch: $(STAMP)
	$(VPY) benchmarks/bench_itch.py --sizes $(SIZES)

# The full-size day: 270M messages, 9,000 symbols, halts, an IPO, far-off prices (C generator, made
# once into benchmarks/build/, ~8 GB, one copy kept), replayed with reports off and with every
# report under /usr/bin/time; figures into benchmarks/RESULTS.md. FULL_ARGS=--no-max-price: a day
# without the $199,999.99 orders; FULL_ARGS=--no-far-off: without any far-off order.
FULL_ARGS ?=
bench-itch-full: $(STAMP)
	$(VPY) benchmarks/bench_itch.py --full --reps 1 --write benchmarks/RESULTS.md $(FULL_ARGS)

# lobreplay against the ITCH peers from the package index, side by side on the generated days
# (benchmarks/RESULTS.md, "Peers side by side"). The peers get their own virtualenv, made from
# the pinned benchmarks/peers-requirements.txt; lobreplay runs from $(VENV).
# R = alternating repetitions, FILES = generated days (wide, narrow; full: the full-size day of
# bench-itch-full, only the rows of issue 28's two ratios, e.g. `make bench FILES=full R=1`);
# DAY_SEED = the generator's seed of wide and narrow (another: other days of the same kinds).
# Each day's section of RESULTS.md is replaced by the next run of that day.
PEERS_VENV := benchmarks/build/peers-venv
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS = itch-book itchcpp meatpy hftbacktest
R ?= 5
FILES ?= wide,narrow
DAY_SEED ?= 7
$(PEERS_STAMP): benchmarks/peers-requirements.txt
	rm -rf $(PEERS_VENV)
	$(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r benchmarks/peers-requirements.txt || \
	  for p in $(PEERS); do $(PEERS_VENV)/bin/python -m pip install --quiet -c benchmarks/peers-requirements.txt $$p \
	    || echo "!!! $$p did not install: make bench reports it"; done
	touch $@

bench: $(STAMP) $(PEERS_STAMP)
	$(VPY) benchmarks/bench_peers.py --peers-python $(PEERS_VENV)/bin/python --reps $(R) --files $(FILES) \
	  --seed $(DAY_SEED) --write benchmarks/RESULTS.md --command "make bench R=$(R) FILES=$(FILES)"

clean:
	rm -rf build *.egg-info lobreplay/_core*.so lobreplay/_core.c lobreplay/_core.o
