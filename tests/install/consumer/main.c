/* The same rank program in C against the C API, built with pkg-config. */
#include <stdio.h>

#include <strata/c_api.h>

int main(void) {
  strata_runtime* rt = NULL;
  strata_placement p;
  if (strata_init(0, &rt) != STRATA_OK ||
      strata_get_placement(rt, &p) != STRATA_OK) {
    fprintf(stderr, "consumer-c: %s\n", strata_last_error());
    return 1;
  }
  printf("consumer-c rank=%d world=%d local_rank=%d local_world=%d job=%s\n",
         p.rank, p.world_size, p.local_rank, p.local_world_size,
         strata_job_id(rt));
  strata_finalize(rt);
  return 0;
}
