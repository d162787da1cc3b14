/* wbcl-run-mpi: ranks, devices, shards, gathering and failure agreement for wbcl-run's modules
 * (tools/run/registry.h, struct wbcl_run_par), on top of wbcl_mpi (include/wbcl/mpi.h).
 *
 * Every collective step begins with wbcl_mpi_agree, so a rank that fails (a bad shard file, a
 * device error) ends every rank with its message and status 1: the failing rank makes one
 * agreement call with its message and no further collective call; the others learn it at their
 * next step. Environment: WBCL_MPI_BUILD=all|root chooses how redunet.fit builds each layer's
 * E, C_j (default all: every rank factors them; root: rank 0 and MPI_Bcast). */
#define _POSIX_C_SOURCE 200809L
#include "par.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/mpi.h"

static wbcl_mpi_job job;
static wbcl_run_par par;

static int agreed_fail(wbcl_run *r)
{
    snprintf(r->err, sizeof r->err, "rank %d: %s", job.failed_rank, job.message);
    return 1;
}

static wbcl_status par_redunet_fit(wbcl_run *r, const wbcl_tensor *X, const int *labels, int classes,
                                   const wbcl_redunet_params *p, wbcl_redunet_progress_fn progress, void *user,
                                   wbcl_tensor *Z, wbcl_redunet **out)
{
    *out = NULL;
    /* the number of classes: the largest label over all ranks, + 1 */
    if (wbcl_mpi_agree(&job, NULL)) {
        agreed_fail(r);
        return WBCL_ERROR_PEER;
    }
    int K = classes;
    MPI_Allreduce(&classes, &K, 1, MPI_INT, MPI_MAX, job.comm);
    const char *b = getenv("WBCL_MPI_BUILD");
    wbcl_mpi_build build = b && !strcmp(b, "root") ? WBCL_MPI_BUILD_ROOT : WBCL_MPI_BUILD_ALL;
    double t0 = MPI_Wtime();
    job.bytes_reduced = job.bytes_broadcast = 0;
    job.seconds_in_collectives = 0.0;
    wbcl_status st = wbcl_mpi_redunet_fit(&job, r->ctx, X, labels, K, p, build, progress, user, Z, out);
    if (st == WBCL_ERROR_PEER && job.failed_rank >= 0) {
        agreed_fail(r);
        return st; /* wbcl_run_check would copy the context's generic message */
    }
    if (!st)
        wbcl_run_info(r, "redunet.fit over %d ranks (build %s): %.3f s, of which %.3f s in collectives on rank 0; "
                         "%llu bytes allreduced, %llu broadcast per rank\n",
                      job.size, build == WBCL_MPI_BUILD_ROOT ? "root+bcast" : "all", MPI_Wtime() - t0,
                      job.seconds_in_collectives, job.bytes_reduced, job.bytes_broadcast);
    return st;
}

static wbcl_status par_circulant_fit(wbcl_run *r, const wbcl_tensor *X, const wbcl_tensor *lift, const int *labels,
                                     int classes, const wbcl_circulant_params *p,
                                     wbcl_circulant_progress_fn progress, void *user, wbcl_tensor *Z,
                                     wbcl_circulant **out)
{
    *out = NULL;
    if (wbcl_mpi_agree(&job, NULL)) { /* the number of classes: the largest label over all ranks, + 1 */
        agreed_fail(r);
        return WBCL_ERROR_PEER;
    }
    int K = classes;
    MPI_Allreduce(&classes, &K, 1, MPI_INT, MPI_MAX, job.comm);
    double t0 = MPI_Wtime();
    job.bytes_reduced = job.bytes_broadcast = 0;
    job.seconds_in_collectives = 0.0;
    wbcl_status st = wbcl_mpi_circulant_fit(&job, r->ctx, X, lift, labels, K, p, progress, user, Z, out);
    if (st == WBCL_ERROR_PEER && job.failed_rank >= 0) {
        agreed_fail(r);
        return st;
    }
    if (!st)
        wbcl_run_info(r, "%s over %d ranks: %.3f s, of which %.3f s in collectives on rank 0; %llu bytes "
                         "allreduced per rank\n",
                      r->mod->name, job.size, MPI_Wtime() - t0, job.seconds_in_collectives, job.bytes_reduced);
    return st;
}

static int par_gather(wbcl_run *r, const wbcl_run_array *local, wbcl_run_array *full)
{
    memset(full, 0, sizeof *full);
    const size_t inner = local->numel / local->shape[0];
    float *all = NULL;
    size_t total = 0;
    if (wbcl_mpi_gather_rows(&job, NULL, local->data, local->shape[0], inner, &all, &total)) return agreed_fail(r);
    if (job.rank == 0) {
        full->ndim = local->ndim;
        memcpy(full->shape, local->shape, sizeof full->shape);
        full->shape[0] = total;
        full->numel = total * inner;
        full->data = all;
    }
    return 0;
}

void wbcl_run_mpi_init(int *argc, char ***argv, wbcl_run *r)
{
    MPI_Init(argc, argv);
    wbcl_mpi_job_init(&job, MPI_COMM_WORLD);
    memset(&par, 0, sizeof par);
    par.rank = job.rank;
    par.size = job.size;
    par.redunet_fit = par_redunet_fit;
    par.circulant_fit = par_circulant_fit;
    par.gather = par_gather;
    par.impl = &job;
    r->par = &par;
}

int wbcl_run_mpi_allowed(wbcl_run *r, const wbcl_run_module *m)
{
    if (!strcmp(m->name, "redunet.fit") || !strcmp(m->name, "redunet.apply")) {
        par.split_ndim = 2; /* rows (m, d) */
        return 0;
    }
    if (!strcmp(m->name, "redunet1d.fit") || !strcmp(m->name, "redunet1d.apply")) {
        par.split_ndim = 3; /* signals (m, C, T) */
        return 0;
    }
    if (!strcmp(m->name, "redunet2d.fit") || !strcmp(m->name, "redunet2d.apply") || !strcmp(m->name, "crate") ||
        !strcmp(m->name, "tost")) {
        par.split_ndim = 4; /* images (m, C, H, W) */
        return 0;
    }
    if (!strncmp(m->name, "attn.", 5)) {
        par.split_ndim = 3; /* the batch of (B, N, d) */
        return 0;
    }
    return wbcl_run_fail(r, "module '%s' does not run over ranks (wbcl-run-mpi runs redunet.fit, redunet.apply, "
                            "redunet1d.*, redunet2d.*, crate, tost and attn.*); run it with wbcl-run",
                         m->name);
}

int wbcl_run_mpi_open(wbcl_run *r, const char *local_error)
{
    char sel[256], err[4096] = "";
    const char *fail = local_error;
    if (wbcl_mpi_device_selector(&job, r->device, sel, sizeof sel, err, sizeof err) && !fail)
        fail = err[0] ? err : "no OpenCL device";
    if (!fail && wbcl_context_create(sel, &r->ctx, err, sizeof err)) {
        r->ctx = NULL;
        fail = err[0] ? err : "cannot open an OpenCL context";
    }
    if (wbcl_mpi_agree(&job, fail)) return agreed_fail(r);
    if (r->ctx && job.rank == 0 && !r->quiet)
        printf("wbcl-run-mpi: %d rank%s; rank 0 on %s\n", job.size, job.size == 1 ? "" : "s",
               wbcl_context_device(r->ctx)->name);
    if (job.rank != 0) r->quiet = 1; /* rank 0 reports */
    return 0;
}

int wbcl_run_mpi_finish(wbcl_run *r, int rc, int opened)
{
    if (!opened) return rc; /* a usage error: the same on every rank, no collective made */
    if (job.failed_rank < 0) {
        if (wbcl_mpi_agree(&job, rc ? (r->err[0] ? r->err : "failed") : NULL)) rc = 1;
    }
    if (job.failed_rank >= 0) {
        agreed_fail(r);
        return 1;
    }
    return rc;
}

int wbcl_run_mpi_prints(const wbcl_run *r)
{
    (void)r;
    return job.rank == 0; /* it has the failing rank's message; one line, not interleaved */
}

void wbcl_run_mpi_end(void) { MPI_Finalize(); }
