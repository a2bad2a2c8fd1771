#!/usr/bin/env bash
# The failio shim fails exactly the selected calls with the selected errno:
# only under its path prefix, only after the byte allowance, only while the
# trigger file exists, only for the selected operations.
set -u
LIB=$1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D/sel" "$D/other"
fails=0
check() {  # check NAME EXPECTED(ok|fail) [env...] -- command...
  local name=$1 want=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  if env LD_PRELOAD="$LIB" STRATA_FAILIO_QUIET=1 "${envs[@]}" "$@" \
      >"$D/out" 2>&1; then got=ok; else got=fail; fi
  if [[ $got != "$want" ]]; then
    echo "FAIL $name: wanted $want, got $got: $(cat "$D/out")"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
P=STRATA_FAILIO_PATH=$D/sel
check "write under the prefix fails" fail "$P" STRATA_FAILIO_ERRNO=ENOSPC -- \
  dd if=/dev/zero of="$D/sel/a" bs=1k count=1 status=none
grep -q "No space left" "$D/out" || { echo "FAIL errno: $(cat "$D/out")"; fails=$((fails + 1)); }
check "write elsewhere succeeds" ok "$P" -- \
  dd if=/dev/zero of="$D/other/a" bs=1k count=1 status=none
check "relative path under the prefix fails" fail "$P" -- \
  sh -c "cd '$D' && dd if=/dev/zero of=sel/b bs=1k count=1 status=none"
check "within the byte allowance succeeds" ok "$P" STRATA_FAILIO_AFTER_BYTES=4096 -- \
  dd if=/dev/zero of="$D/sel/c" bs=1k count=4 status=none
check "past the byte allowance fails" fail "$P" STRATA_FAILIO_AFTER_BYTES=4096 -- \
  dd if=/dev/zero of="$D/sel/d" bs=1k count=5 status=none
check "trigger absent: no fault" ok "$P" STRATA_FAILIO_TRIGGER="$D/trigger" -- \
  dd if=/dev/zero of="$D/sel/e" bs=1k count=1 status=none
touch "$D/trigger"
check "trigger present: fault" fail "$P" STRATA_FAILIO_TRIGGER="$D/trigger" -- \
  dd if=/dev/zero of="$D/sel/f" bs=1k count=1 status=none
check "sync only: plain write succeeds" ok "$P" STRATA_FAILIO_OPS=sync -- \
  dd if=/dev/zero of="$D/sel/g" bs=1k count=1 status=none
check "sync only: fsync fails" fail "$P" STRATA_FAILIO_OPS=sync -- \
  dd if=/dev/zero of="$D/sel/h" bs=1k count=1 conv=fsync status=none
check "create fails" fail "$P" STRATA_FAILIO_OPS=create -- touch "$D/sel/new"
[[ -e $D/sel/new ]] && { echo "FAIL create: file exists"; fails=$((fails + 1)); }
check "rename into the prefix fails" fail "$P" STRATA_FAILIO_OPS=rename -- \
  mv "$D/other/a" "$D/sel/moved"
[[ -e $D/other/a ]] || { echo "FAIL rename: source gone"; fails=$((fails + 1)); }
echo "$fails failures"
exit $((fails > 0))
