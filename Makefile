# refundd: `make run` to try it, `make test` to check it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO           ?= go
TEST_TIMEOUT ?= 8m
# Inputs each fuzz target tries in `make test`, beyond its seed corpus. A
# count, not a -fuzztime duration: in Go 1.26 a duration can end the run
# with a spurious "context deadline exceeded" (go.dev/issue/75804).
FUZZ_EXECS   ?= 1000
PG_BIN       := /usr/lib/postgresql/15/bin
CHROMIUM     := /usr/lib/chromium/chromium
VENDOR       := static/vendor
VENDOR_FILES := $(VENDOR)/htmx.min.js $(VENDOR)/sse.js

.PHONY: build run test test-vet test-go test-handlers test-fuzz deps deps-run generate clean

## build: fetch the front-end packages (from the lockfile) and build bin/refundd
build: $(VENDOR_FILES)
	$(GO) build -o bin/refundd .

## run: install what is missing, build, and run `refundd dev`
run: deps-run build
	./bin/refundd dev

## test: install what is missing, then gofmt check, go vet, every test (browser ones included) and a short fuzz run
test: deps $(VENDOR_FILES)
	@unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path './node_modules/*' -not -path './.data/*'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@# The tests mostly wait (on streams, PostgreSQL, a browser); vet and
	@# the fuzz runs mostly compile. Side by side they share the cores.
	$(MAKE) --no-print-directory --output-sync=target -j4 test-vet test-go test-handlers test-fuzz

# test-vet: go vet over every package.
test-vet:
	$(GO) vet ./...

# test-go: every test but the handlers' (test-handlers). It and the fuzz
# runs yield the CPU to the handlers' tests (nice), the longest job, so
# that they fill its waits instead of stretching it.
NICE ?= nice -n 5
test-go:
	$(NICE) $(GO) test -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/handlers$$')

# test-handlers: the handlers' tests, browser ones included. They mostly
# wait (on a browser, a stream, a deadline), so six run at once: their
# tests add up to about 1,420 s, and alone six at once took 250 s with one
# Chromium for all of them (367 s with one each). A test that needs a state to last (a held
# provider answer) holds it until it lets go, so a loaded machine only
# slows it. Its timeout is its own, to catch a hang only.
HANDLERS_TIMEOUT ?= 12m
test-handlers:
	$(GO) test -timeout $(HANDLERS_TIMEOUT) -parallel 6 ./handlers

# test-fuzz: a short run of each fuzz target beyond its seed corpus.
test-fuzz:
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzParseCursor$$' -fuzztime $(FUZZ_EXECS)x ./store
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzParseAmount$$' -fuzztime $(FUZZ_EXECS)x ./handlers
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzStartForm$$' -fuzztime $(FUZZ_EXECS)x ./handlers
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzDecodeStartBody$$' -fuzztime $(FUZZ_EXECS)x ./handlers
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzClientText$$' -fuzztime $(FUZZ_EXECS)x ./handlers
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzSSEMessage$$' -fuzztime $(FUZZ_EXECS)x ./handlers/stream
	$(NICE) $(GO) test -run '^$$' -fuzz '^FuzzReadReceipt$$' -fuzztime $(FUZZ_EXECS)x ./payments

## generate: regenerate the templ components (their output is committed)
generate:
	$(GO) tool templ generate

clean:
	rm -rf bin node_modules $(VENDOR)

# The front-end packages come from npm at the exact versions in
# package-lock.json; the stamp makes npm run only when the lockfile changes.
node_modules/.installed: package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund
	touch $@

$(VENDOR)/htmx.min.js: node_modules/.installed
	mkdir -p $(VENDOR)
	cp node_modules/htmx.org/dist/htmx.min.js $@

$(VENDOR)/sse.js: node_modules/.installed
	mkdir -p $(VENDOR)
	cp node_modules/htmx-ext-sse/dist/sse.js $@

# install_missing takes "program=debian-package" pairs (a program's name,
# or a path a package installs) and installs the packages whose program is
# missing: with apt-get as root, otherwise it
# prints the command to run. apt-get update runs only when something is missing.
define install_missing
missing=""; \
for want in $(1); do \
	prog="$${want%%=*}"; pkg="$${want#*=}"; \
	if [ ! -e "$$prog" ] && ! command -v "$$prog" >/dev/null 2>&1; then missing="$$missing $$pkg"; fi; \
done; \
if [ -n "$$missing" ]; then \
	if [ "$$(id -u)" -ne 0 ]; then \
		echo "missing:$$missing. Install with: sudo apt-get update && sudo apt-get install -y --no-install-recommends$$missing" >&2; \
		exit 1; \
	fi; \
	echo "installing:$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq; \
	apt-get install -y -qq --no-install-recommends $$missing; \
fi; \
command -v $(GO) >/dev/null || { echo "Go is missing: install Go 1.26 from https://go.dev/dl/" >&2; exit 1; }
endef

## deps: what `make test` needs: PostgreSQL's server, Chromium, CJK fonts (the Chinese pages' screenshots), nginx (a stream test proxies through it), npm
CJK_FONT := /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
deps:
	@$(call install_missing,$(PG_BIN)/initdb=postgresql $(CHROMIUM)=chromium $(CJK_FONT)=fonts-noto-cjk /usr/sbin/nginx=nginx npm=npm)

## deps-run: what `make run` needs: PostgreSQL's server, npm
deps-run:
	@$(call install_missing,$(PG_BIN)/initdb=postgresql npm=npm)
