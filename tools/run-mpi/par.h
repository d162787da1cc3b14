/* wbcl-run-mpi: the MPI side of wbcl-run (tools/run/main.c built with -DWBCL_RUN_MPI). */
#ifndef WBCL_RUN_PAR_H
#define WBCL_RUN_PAR_H
#include "registry.h"

/* MPI_Init; r->par set. */
void wbcl_run_mpi_init(int *argc, char ***argv, wbcl_run *r);
/* Whether module m runs over ranks (the same answer on every rank): 0, or 1 with the reason set. */
int wbcl_run_mpi_allowed(wbcl_run *r, const wbcl_run_module *m);
/* Chooses this rank's device, opens r->ctx and agrees on failure (local_error: a failure found
 * before, e.g. rank 0's --output check, or NULL). 0, or 1 with the reason set on every rank. */
int wbcl_run_mpi_open(wbcl_run *r, const char *local_error);
/* After the module: agrees on the outcome (unless a failure was already agreed on), sets the
 * reason to the failing rank's message; returns the exit status of this rank. */
int wbcl_run_mpi_finish(wbcl_run *r, int rc, int opened);
/* Whether this rank prints the reason: rank 0 only (after an agreed failure it holds the failing
 * rank's message; usage errors are the same on every rank). */
int wbcl_run_mpi_prints(const wbcl_run *r);
/* MPI_Finalize. */
void wbcl_run_mpi_end(void);
#endif
