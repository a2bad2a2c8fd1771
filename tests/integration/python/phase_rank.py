"""A rank for phase_test.sh: STEPS steps of 50 ms, then an evaluation that
sleeps EVAL_S seconds (inside `rt.phase("eval")` unless --no-phase), then
STEPS more steps. Usage: phase_rank.py STEPS EVAL_S [--no-phase]."""

import contextlib
import sys
import time

import strata


def main():
    steps, eval_s = int(sys.argv[1]), float(sys.argv[2])
    use_phase = "--no-phase" not in sys.argv
    with strata.Runtime() as rt:
        step = 0
        for _ in range(2):
            for _ in range(steps):
                time.sleep(0.05)
                step += 1
                rt.end_step(step, tokens=1, sections={"forward": 0.05})
            evaluation = rt.phase("eval", 60) if use_phase \
                else contextlib.nullcontext()
            with evaluation:
                time.sleep(eval_s)
        print(f"rank {rt.rank} done at step {step}", flush=True)


if __name__ == "__main__":
    main()
