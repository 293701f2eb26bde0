# Queen for Go. `make run` starts a broker with a local PostgreSQL;
# `make test` runs every test (it starts its own throwaway PostgreSQL).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-short generate verify vet fmt bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/queen ./cmd/queen

# Starts (or reuses) the project-local PostgreSQL in .data/ and runs the
# broker on :6632 in the foreground. Ctrl-C drains and stops the broker;
# `scripts/localpg stop` stops the database.
run: build
	scripts/localpg start
	eval "$$(scripts/localpg env)" && exec ./bin/queen

# Every test, with the race detector. The harness in sql/pgtest starts a
# throwaway PostgreSQL cluster from the installed binaries.
test:
	scripts/ensure-chromium
	scripts/ensure-pg-auto-failover
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

generate:
	$(GO) tool sqlc generate
	$(GO) tool oapi-codegen -config openapi/oapi-codegen.yaml openapi/openapi.yaml
	$(GO) run ./openapi/routegen

# Fails when gen/ is not what the spec and the SQL produce.
verify: generate
	@git add -N gen >/dev/null 2>&1 || true
	@if ! git diff --quiet -- gen; then \
		echo "gen/ is stale: run make generate and commit the result"; git diff --stat -- gen; exit 1; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin

# Benchmarks against a running broker (make run in another terminal).
bench:
	$(GO) run ./cmd/queen-bench all -url http://127.0.0.1:6632

# Aggregate rates with 1, 2 and 3 brokers on one local database
# (docs/benchmarks.md); starts and stops the brokers itself.
bench-brokers:
	scripts/bench-brokers
