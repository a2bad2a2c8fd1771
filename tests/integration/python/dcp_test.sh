#!/bin/sh
# strata.torch's DCP storage in one process (dcp_test.py) with torch 2.x
# from the project's venv. Usage: dcp_test.sh BUILD_DIR SOURCE_DIR.
set -eu
build=$1
src=$2
. "$src/tests/integration/python/torch_env.sh"
exec "$PY" "$src/tests/integration/python/dcp_test.py"
