# The two commands of README.md. Both install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: deps build demo test bench package format clean

deps:
	./deploy/install-deps.sh

build: deps
	cmake --preset default -B $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)
	./deploy/python-venv.sh $(BUILD)/venv

# The main job (deploy/demo.yaml): strata-train's `small` GPT on a local
# cluster of 2 simulated nodes x 2 ranks and a hot spare, planned from the
# probes, checkpointing into RocksDB; one worker is killed at step 60 and the
# job resumes on the spare with the same plan (docs/fault.md "Hot spares").
DEMO_CKPT ?= /tmp/strata-demo/ckpt
demo: build
	rm -rf $(DEMO_CKPT)
	PATH=$(CURDIR)/$(BUILD)/runtime:$$PATH $(BUILD)/cli/strata run \
	  deploy/demo.yaml --ckpt rocksdb://$(DEMO_CKPT) --kill-worker-at-step 60

# The package tests (deb_test, container_test, ...) install what
# `make package` built.
test: build package
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The Debian packages (strata, strata-dev, python3-strata, strata-bench) and
# the Python wheel, in $(PKG_BUILD)/packages (docs/deploy.md). Their own
# build: without CUDA (no Debian package provides /usr/local/cuda's
# libraries) and without tests; ccache makes most of it cache hits.
PKG_BUILD ?= $(BUILD)-package
package: deps
	cmake --preset default -B $(PKG_BUILD) -DSTRATA_WITH_CUDA=OFF \
	  -DSTRATA_BUILD_TESTS=OFF
	cmake --build $(PKG_BUILD) -j $(JOBS)
	cmake --build $(PKG_BUILD) --target package strata_wheel
	ls -l $(PKG_BUILD)/packages

bench: build
	$(BUILD)/bench/strata-bench plan

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
