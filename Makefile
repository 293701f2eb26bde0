# Queen for Go. `make run` starts a broker with a local PostgreSQL;
# `make test` runs every test (it starts its own throwaway PostgreSQL).
# Needs go (1.26) on PATH; `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all help build proxy run test generate generate-go generate-ts ts-deps verify lint lint-spec vet fmt bench bench-backlog clean

# The TypeScript SDK: its packages come from the committed lock file.
TS_SDK := sdk/typescript
TS_DEPS := $(TS_SDK)/node_modules/.package-lock.json
# The spec's linter (spectral), pinned the same way.
SPEC_LINT := openapi/lint
SPEC_LINT_DEPS := $(SPEC_LINT)/node_modules/.package-lock.json

all: build

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/queen
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/queen ./cmd/queen

# The TLS and API-key front door (docs/proxy.md).
proxy: ## build bin/queen-proxy
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/queen-proxy ./cmd/queen-proxy

# Starts (or reuses) the project-local PostgreSQL in .data/ and runs the
# broker on :6632 in the foreground. Ctrl-C drains and stops the broker;
# `scripts/localpg stop` stops the database.
run: build ## serve on :6632 with the local PostgreSQL in .data/
	scripts/localpg start
	eval "$$(scripts/localpg env)" && exec ./bin/queen

# Every test, with the race detector. The harness in sql/pgtest starts a
# throwaway PostgreSQL cluster from the installed binaries.
test: $(TS_DEPS) ## every test, race detector on (installs chromium and promtool when missing)
	scripts/ensure-chromium
	scripts/ensure-promtool
	scripts/ensure-pg-auto-failover
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

generate: generate-go generate-ts ## regenerate gen/ and the TypeScript SDK's types from openapi/openapi.yaml and sql/

generate-go:
	$(GO) tool sqlc generate
	$(GO) tool oapi-codegen -config openapi/oapi-codegen.yaml openapi/openapi.yaml
	$(GO) tool oapi-codegen -config openapi/oapi-codegen-client.yaml openapi/openapi.yaml
	$(GO) run ./openapi/routegen

# The TypeScript SDK's types (openapi-typescript) from the same spec.
generate-ts: $(TS_DEPS)
	node $(TS_SDK)/scripts/generate.mjs $(TS_SDK)/src/schema.d.ts

$(TS_DEPS): $(TS_SDK)/package.json $(TS_SDK)/package-lock.json
	cd $(TS_SDK) && npm ci --no-audit --no-fund

ts-deps: $(TS_DEPS) ## install the TypeScript SDK's packages from its lock file

# Fails when gen/ or the TypeScript SDK's schema.d.ts is not what the spec
# and the SQL produce, when code is not gofmt-ed, when go.mod is not tidy,
# or when the linters (the layering rules of .golangci.yml included) object.
# It reads git's state without writing the index (--no-optional-locks), so
# it is safe beside other git commands; the schema is generated to a
# temporary file and compared, so the working tree stays as it is.
verify: generate-go lint lint-spec $(TS_DEPS) ## fail on a stale gen/ or schema.d.ts, gofmt, go.mod drift or a lint finding
	@if [ -n "$$(git --no-optional-locks status --porcelain -- gen)" ]; then \
		echo "gen/ is stale: run make generate and commit the result"; \
		git --no-optional-locks status --porcelain -- gen; exit 1; fi
	@tmp=$$(mktemp --suffix=.d.ts) && trap 'rm -f $$tmp' EXIT && \
		node $(TS_SDK)/scripts/generate.mjs $$tmp 2>/dev/null && \
		if ! cmp -s $$tmp $(TS_SDK)/src/schema.d.ts; then \
			echo "$(TS_SDK)/src/schema.d.ts is stale: run make generate and commit the result"; \
			diff -u $(TS_SDK)/src/schema.d.ts $$tmp | head -40; exit 1; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

lint: ## golangci-lint (pinned in go.mod): depguard layering, errcheck, staticcheck, govet
	$(GO) tool golangci-lint run ./...

# Spectral's OpenAPI rules and the project's (openapi/lint/spectral.yaml);
# kin-openapi's validation runs in openapi/spec_test.go.
lint-spec: $(SPEC_LINT_DEPS) ## spectral on openapi/openapi.yaml
	cd $(SPEC_LINT) && node_modules/.bin/spectral lint --ruleset spectral.yaml --fail-severity warn ../openapi.yaml

$(SPEC_LINT_DEPS): $(SPEC_LINT)/package.json $(SPEC_LINT)/package-lock.json
	cd $(SPEC_LINT) && npm ci --no-audit --no-fund

vet: ## go vet
	$(GO) vet ./...

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

clean: ## remove bin/
	rm -rf bin

# Benchmarks against a running broker (make run in another terminal).
bench: ## every bench scenario against http://127.0.0.1:6632
	$(GO) run ./cmd/queen-bench all -url http://127.0.0.1:6632

# The deep backlog (docs/benchmarks.md, "Performance round 2: deep
# backlog"): fills a queue with 1,000,000 messages over 100,000 partitions,
# then times pops and the dashboard's routes. Not in `bench`: the fill
# takes a minute or more and its queue would weigh on every later row.
bench-backlog: ## the deep-backlog scenario against http://127.0.0.1:6632
	$(GO) run ./cmd/queen-bench backlog -url http://127.0.0.1:6632

# Aggregate rates with 1, 2 and 3 brokers on one local database
# (docs/benchmarks.md); starts and stops the brokers itself.
bench-brokers:
	scripts/bench-brokers
