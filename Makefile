# The two commands of README.md. Both install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: deps build demo test bench format clean

deps:
	./deploy/install-deps.sh

build: deps
	cmake --preset default -B $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)

# Until the reference trainer exists the main job is the planner: how to run
# Llama-3-70B on 64 H100s with global batch 256, explained.
demo: build
	$(BUILD)/cli/strata plan --model llama3-70b --cluster dgx-h100 --gpus 64 \
	  --global-batch 256 --seq 8192 --top 5 --explain

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/bench/strata-bench plan

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
