#!/bin/sh
# strata.torch's step monitor in one process (monitor_test.py) with torch
# 2.x from the project's venv. Usage: monitor_test.sh BUILD_DIR SOURCE_DIR.
set -eu
build=$1
src=$2
. "$src/tests/integration/python/torch_env.sh"
exec "$PY" "$src/tests/integration/python/monitor_test.py"
