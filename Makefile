# Queen for Go. `make run` starts a broker with a local PostgreSQL;
# `make test` runs every test (it starts its own throwaway PostgreSQL).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build run test test-short generate generate-go generate-ts ts-deps verify vet fmt bench clean

# The TypeScript SDK: its packages come from the committed lock file.
TS_SDK := sdk/typescript
TS_DEPS := $(TS_SDK)/node_modules/.package-lock.json

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
test: $(TS_DEPS)
	scripts/ensure-chromium
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

generate: generate-go generate-ts

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

ts-deps: $(TS_DEPS)

# Fails when gen/ or the TypeScript SDK's schema.d.ts is not what the spec
# and the SQL produce. The schema is generated to a temporary file and
# compared, so the working tree and the git index stay as they are.
verify: generate-go $(TS_DEPS)
	@git add -N gen >/dev/null 2>&1 || true
	@if ! git diff --quiet -- gen; then \
		echo "gen/ is stale: run make generate and commit the result"; git diff --stat -- gen; exit 1; fi
	@tmp=$$(mktemp --suffix=.d.ts) && trap 'rm -f $$tmp' EXIT && \
		node $(TS_SDK)/scripts/generate.mjs $$tmp 2>/dev/null && \
		if ! cmp -s $$tmp $(TS_SDK)/src/schema.d.ts; then \
			echo "$(TS_SDK)/src/schema.d.ts is stale: run make generate and commit the result"; \
			diff -u $(TS_SDK)/src/schema.d.ts $$tmp | head -40; exit 1; fi
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
