# Sourced by the package tests: fresh_packages BUILD -> BUILD/packages holds
# .deb files made by cpack from the current build (remade when any installed
# binary is newer than them; the tests run serially, so they never race).
fresh_packages() {
  local build=$1 out=$1/packages newest
  if [ ! -x "$build/cli/strata" ] || [ ! -f "$build/CPackConfig.cmake" ]; then
    echo "FAIL: no built strata in $build to package: run \`make package\` (it builds" \
      "the CUDA-free packaging build there when the main build links CUDA)" >&2
    exit 1
  fi
  newest=$(ls -t "$out"/strata_*.deb 2> /dev/null | head -1 || true)
  if [ -n "$newest" ] && [ -z "$(find "$build/cli/strata" "$build/coordinator/strata-coordinator" \
    "$build/worker/strata-worker" "$build/runtime/strata-train" "$build/runtime/libstrata.so.0" \
    "$build/CPackConfig.cmake" -newer "$newest" 2> /dev/null)" ]; then
    return 0
  fi
  rm -f "$out"/*.deb
  (cd "$build" && cpack --config CPackConfig.cmake -B "$out") > "$build/cpack.log" 2>&1 \
    || { cat "$build/cpack.log" >&2; echo "FAIL: cpack" >&2; exit 1; }
  rm -rf "$out/_CPack_Packages"
}
