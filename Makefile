# etcd-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
export GOTOOLCHAIN := local

TOOLS          := go tool -modfile=hack/tools/go.mod
CONTROLLER_GEN := $(TOOLS) controller-gen
KUSTOMIZE      := $(TOOLS) kustomize
GOLANGCI_LINT  := $(TOOLS) golangci-lint
# helm has a module of its own: its Kubernetes libraries need not follow the other tools'.
HELM           := go tool -modfile=hack/tools/helm/go.mod helm
# crd-ref-docs too: it writes docs/api.md from the Go types of api/v1beta1.
CRD_REF_DOCS   := go tool -modfile=hack/tools/crd-ref-docs/go.mod crd-ref-docs
CHART          := charts/etcd-operator
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG            ?= docker.io/local/etcd-operator:dev
# Where make build and make image write (make release points them into RELEASE_DIR).
OPERATOR_BIN   ?= bin/etcd-operator
IMAGE_TAR      ?= bin/etcd-operator.tar
RELEASE_DIR    ?= bin/release/$(VERSION)
# Packages with unit and integration tests (test/e2e needs a cluster: make test-e2e).
TEST_PKGS      := ./api/... ./cmd/... ./internal/... ./hack/imgpack/... ./hack/imgpush/...

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

##@ Main
.PHONY: demo
demo: ## Bring up a local Kubernetes (unless KUBECONFIG is set), install the operator, run a 3-member cluster, write and read a key.
	bash hack/demo.sh

.PHONY: test
# The suites' etcd members listen on fixed loopback addresses, so two runs on one machine (two
# checkouts) would collide: the second waits for the first, and says so.
TEST_LOCK      := /tmp/etcd-operator-make-test.lock

test: envtest s3-server cert-manager promtool ## Run the unit and integration tests (real kube-apiserver, etcd, S3 server and cert-manager; builds them once per machine).
	@flock -n $(TEST_LOCK) true || echo "another make test runs on this machine (its etcd members use the same loopback addresses): waiting for it to finish"
	flock -o $(TEST_LOCK) env KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh --print)" VERSITYGW="$$(bash hack/build-s3.sh --print)" CERT_MANAGER="$$(bash hack/build-cert-manager.sh --print)" go test -count=1 -timeout 20m $(TEST_PKGS)

.PHONY: test-e2e
test-e2e: ## Run the end-to-end tests against KUBECONFIG, or the local cluster (brought up if needed).
	bash hack/test-e2e.sh

.PHONY: chaos
chaos: ## Inject 200 random faults (CHAOS_FAULTS, seed CHAOS_SEED) into a cluster under a linearizability-checked workload (about 70 minutes).
	CHAOS_FAULTS=$${CHAOS_FAULTS:-200} E2E_TIMEOUT=$${E2E_TIMEOUT:-5h} E2E_ARGS="-run TestChaos" bash hack/test-e2e.sh

##@ Development
.PHONY: manifests
manifests: ## Generate the CRD, the RBAC roles, the webhook configurations, dist/install.yaml, dist/install-namespaced.yaml and the chart's CRDs, rules and values.schema.json from the Go markers, config/ and the chart's values.yaml.
	$(CONTROLLER_GEN) rbac:roleName=etcd-operator crd webhook paths="./api/...;./cmd/...;./internal/controller/...;./internal/webhook/...;./internal/storageversion/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	sed -i '/^spec:$$/r config/crd/conversion.snippet' config/crd/bases/*.yaml
	go run ./hack/nsrbac
	@mkdir -p dist
	$(KUSTOMIZE) build config/default > dist/install.yaml
	bash hack/install-namespaced.sh > dist/install-namespaced.yaml
	go run ./hack/chartgen

.PHONY: generate
generate: ## Generate the deepcopy functions of the API types, and the list of etcd's flags (internal/etcdflags) from the etcd server module in go.mod.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."
	go run ./hack/etcdflags

.PHONY: docs
docs: ## Generate the API reference docs/api.md from the Go types of api/v1beta1 (crd-ref-docs, hack/tools/crd-ref-docs).
	$(CRD_REF_DOCS) --source-path=./api/v1beta1 --config=hack/tools/crd-ref-docs/config.yaml \
		--renderer=markdown --output-path=docs/api.md --log-level=ERROR

.PHONY: fmt
fmt: ## gofmt the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet the code, the end-to-end tests included.
	go vet ./...
	go vet -tags e2e ./test/...

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml) over the code, the end-to-end tests included.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests docs fmt vet lint ## Fail when generated files (docs/api.md included) or formatting are not current, an install variant does not build, or the linter finds something.
	@for k in config/local config/certmanager config/namespaced config/prometheus; do $(KUSTOMIZE) build $$k >/dev/null || { echo "$$k does not build"; exit 1; }; done
	@bash hack/install-namespaced.sh --namespace ops --watch apps,db >/dev/null || { echo "hack/install-namespaced.sh does not render a list of namespaces"; exit 1; }
	@bash hack/release.sh --check
	@go run ./hack/benchtable -check
	$(MAKE) -s verify-chart
	@git diff --exit-code -- api config dist charts docs/api.md '*.go' || { echo "generated files or formatting are stale: run 'make generate manifests docs fmt' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config dist charts docs/api.md)" || { git status --porcelain -- api config dist charts docs/api.md; echo "untracked generated files: commit them"; exit 1; }

.PHONY: verify-chart
verify-chart: ## Lint the Helm chart, render its variants, and fail when it installs other than dist/ (hack/chartgen's test).
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --namespace ops --set namespaced=true --set 'watchNamespaces={apps,db}'
	$(HELM) lint --strict $(CHART) --set webhook.certProvisioner=certManager --set metrics.serviceMonitor.enabled=true --set metrics.podMonitor.enabled=true --set metrics.prometheusRule.enabled=true
	@for v in "" "--set namespaced=true" "--set webhook.certProvisioner=certManager"; do $(HELM) template etcd-operator $(CHART) --namespace etcd-operator-system $$v >/dev/null || { echo "helm template $$v fails"; exit 1; }; done
	go test -count=1 ./hack/chartgen

.PHONY: build
build: ## Build bin/etcd-operator (static; OPERATOR_BIN), version VERSION (`etcd-operator version` prints it).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(OPERATOR_BIN) ./cmd/etcd-operator

.PHONY: plugin
plugin: ## Build bin/kubectl-etcd, the kubectl plugin (on PATH, `kubectl etcd` runs it; docs/kubectl-plugin.md).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/kubectl-etcd ./cmd/kubectl-etcd

.PHONY: image
# The image carries Debian's CA bundle (hack/ca-certificates.sh installs it when missing) at the path
# Go reads first, so that backups to https:// S3 endpoints of public CAs verify. Its labels name the
# version (org.opencontainers.image.version) and the source.
image: build ## Pack the operator image $(IMG) into bin/etcd-operator.tar (IMAGE_TAR; no Docker needed), labelled with VERSION.
	ca=$$(bash hack/ca-certificates.sh) && go run ./hack/imgpack -o $(IMAGE_TAR) -name $(IMG) -entrypoint /etcd-operator -user 65532 \
		-label org.opencontainers.image.version=$(VERSION) -label org.opencontainers.image.source=https://github.com/etcdkit/etcd-operator \
		$(OPERATOR_BIN):/etcd-operator "$$ca:/etc/ssl/certs/ca-certificates.crt:0644"

.PHONY: push
# hack/imgpush reads registry credentials from ~/.docker/config.json ($$DOCKER_CONFIG) and, with
# INSECURE_REGISTRY=1, speaks plain HTTP or accepts a certificate it cannot verify.
push: ## Build the operator image (make image) and push it to IMG=<registry>/<name>:<tag>; prints its digest. INSECURE_REGISTRY=1 for a plain-HTTP registry.
	@case "$(IMG)" in docker.io/local/*) echo "IMG=$(IMG) is the local cluster's image name, which no registry serves: set IMG=<registry>/<name>:<tag>, e.g. make push VERSION=v0.2.0 IMG=ghcr.io/me/etcd-operator:v0.2.0" >&2; exit 2;; esac
	@go run ./hack/imgpush -check -version "$(VERSION)" $(IMG)
	$(MAKE) -s image >/dev/null
	go run ./hack/imgpush -version "$(VERSION)" $(IMAGE_TAR) $(IMG)

.PHONY: release
release: ## Build release VERSION=vX.Y.Z for IMG=<registry>/<name> into bin/release/VERSION: binary, image IMG:VERSION, install.yaml, install-namespaced.yaml, Helm chart (hack/release.sh); then make push.
	bash hack/release.sh --version "$(VERSION)" --image "$(IMG)" --out "$(RELEASE_DIR)" $(if $(RELEASE_NAMESPACE),--namespace "$(RELEASE_NAMESPACE)")

.PHONY: promtool
promtool: ## Build promtool (hack/tools/promtool/go.mod), which the alert rules' tests run (once per machine, ~5 min cold).
	go tool -modfile=hack/tools/promtool/go.mod promtool --version >/dev/null

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for the integration tests (once per machine).
	bash hack/envtest.sh

.PHONY: s3-server
s3-server: ## Build the S3-compatible server (versitygw) the backup tests write to (once per machine).
	bash hack/build-s3.sh

.PHONY: cert-manager
cert-manager: ## Build cert-manager's certificate controllers the tests of spec.tls.issuerRef run (once per machine, ~8 min cold).
	bash hack/build-cert-manager.sh

.PHONY: cluster-up
cluster-up: ## Bring up the local single-node Kubernetes (builds it once per machine, ~15 min cold).
	bash hack/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local Kubernetes; PURGE=1 also wipes its state.
	bash hack/cluster-down.sh $(if $(PURGE),--purge,)

.PHONY: bench
bench: bench-backup ## Measure backup and restore, then the floor (a static StatefulSet) and the operator side by side (bootstrap, member recovery, scaling) and a rolling upgrade, on the local cluster (or KUBECONFIG); rewrite README's measured table.
	OPERATOR_ARGS= E2E_ARGS="-run ^$$ -bench SideBySide -benchtime 1x" bash hack/test-e2e.sh
	go run ./hack/benchtable -in bin/bench/sidebyside.json
	@echo "docs/bench/sidebyside.json and README.md's measured table are new: commit them"

.PHONY: bench-backup
bench-backup: s3-server ## Measure backup throughput against etcdctl snapshot save, and restore time, on a ~300 MB database (no cluster needed).
	VERSITYGW="$$(bash hack/build-s3.sh --print)" go test -count=1 -run '^$$' -bench . -benchtime 3x ./internal/backup
