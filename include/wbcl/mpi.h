/* wbcl_mpi — data-parallel wbcl over MPI (built with -DWBCL_MPI=ON; link wbcl::wbcl_mpi).
 *
 * A thin layer on top of the public API; the core library has no MPI dependency. It provides:
 *   - a job object: the communicator, this rank, and the failure agreement every collective step
 *     begins with (so that a rank that fails ends every rank with its message, never a hang);
 *   - device choice per rank: the local rank (ranks on the same node) modulo the devices there;
 *   - contiguous row shards;
 *   - the vector ReduNet construction over the ranks (wbcl_redunet_fit_shard with MPI_Allreduce);
 *   - the shift-invariant ReduNet construction over the ranks (wbcl_circulant_fit_shard, likewise);
 *   - gathering per-rank rows in rank order to rank 0 (batched inference).
 *
 * Failure protocol (the same as wbcl_redunet_comm's, see wbcl/redunet.h): ranks make the same
 * sequence of collective calls; every collective of this layer starts with wbcl_mpi_agree. A rank
 * that fails locally calls wbcl_mpi_agree with its message exactly once and stops making collective
 * calls; every other rank learns the failure (rank and message) at its next collective call and
 * stops too. After a failure was agreed on, job->failed_rank >= 0 and job->message hold it.
 *
 * Nothing here prints or exits; MPI errors keep MPI's default handler (MPI_ERRORS_ARE_FATAL: the job
 * ends). Functions are collective over job->comm unless they say otherwise. */
#ifndef WBCL_MPI_H
#define WBCL_MPI_H

#include <mpi.h>
#include <stddef.h>

#include "wbcl/circulant.h"
#include "wbcl/context.h"
#include "wbcl/redunet.h"
#include "wbcl/status.h"
#include "wbcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WBCL_MPI_MESSAGE_MAX 1024

typedef struct wbcl_mpi_job {
    MPI_Comm comm;
    int rank, size;
    int failed_rank;                     /* -1 until a failure was agreed on                      */
    char message[WBCL_MPI_MESSAGE_MAX];  /* the failing rank's message                            */
    wbcl_context *ctx;                   /* optional: a failing library call's message is taken
                                            from here (wbcl_context_last_error)                   */
    /* counters (this rank): data reduced/broadcast by the collective steps, and their wall time */
    unsigned long long bytes_reduced, bytes_broadcast, collectives;
    double seconds_in_collectives;
} wbcl_mpi_job;

/* Not collective. Fills job for comm (MPI must be initialized). */
void wbcl_mpi_job_init(wbcl_mpi_job *job, MPI_Comm comm);

/* The failure agreement: local_error is NULL (this rank is fine) or its one-line message. Returns 0
 * when no rank failed; otherwise 1 with job->failed_rank (the lowest failing rank) and
 * job->message set on every rank. */
int wbcl_mpi_agree(wbcl_mpi_job *job, const char *local_error);

/* Not collective. Rows [*begin, *begin + *count) of m for `rank` of `size`: contiguous shards in
 * rank order, the first m % size ranks one row more. */
void wbcl_mpi_shard(size_t m, int rank, int size, size_t *begin, size_t *count);

/* The device selector of this rank into sel (selen bytes): `requested` when non-NULL and non-empty,
 * else $WBCL_DEVICE when set, else the index (local rank modulo the number of devices on this
 * node) as a decimal string. Ranks on one node are those MPI_Comm_split_type(SHARED) groups.
 * Returns 0, or 1 with err set (no OpenCL device) -- a local failure: agree on it. */
int wbcl_mpi_device_selector(wbcl_mpi_job *job, const char *requested, char *sel, size_t selen, char *err,
                             size_t errlen);

/* How the ranks obtain each layer's E, C_j from the summed statistics. */
typedef enum wbcl_mpi_build {
    WBCL_MPI_BUILD_ALL = 0,  /* every rank factors the K+1 matrices itself (no second message)  */
    WBCL_MPI_BUILD_ROOT = 1  /* rank 0 builds them; MPI_Bcast sends the layer (and objective)   */
} wbcl_mpi_build;

/* wbcl_redunet_fit_shard over the ranks of job: X, labels this rank's shard (m_local >= 1).
 * Gram matrices and class counts are summed with MPI_Allreduce (MPI_DOUBLE, MPI_SUM). Returns the
 * same outcome on every rank; on success *out is the same model everywhere. A failure elsewhere is
 * WBCL_ERROR_PEER (job->failed_rank, job->message say who and why). progress is called on every
 * rank. */
wbcl_status wbcl_mpi_redunet_fit(wbcl_mpi_job *job, wbcl_context *ctx, const wbcl_tensor *X, const int *labels,
                                 int classes, const wbcl_redunet_params *params, wbcl_mpi_build build,
                                 wbcl_redunet_progress_fn progress, void *user, wbcl_tensor *Z,
                                 wbcl_redunet **out);

/* wbcl_circulant_fit_shard over the ranks of job (the shift-invariant ReduNet): X, labels this
 * rank's samples (m_local >= 1), lift the same lifting kernel (or NULL) on every rank. The per-frequency
 * statistics are summed with MPI_Allreduce (MPI_DOUBLE, MPI_SUM); every rank factors them itself.
 * Same outcome on every rank; failures elsewhere are WBCL_ERROR_PEER as above. */
wbcl_status wbcl_mpi_circulant_fit(wbcl_mpi_job *job, wbcl_context *ctx, const wbcl_tensor *X,
                                   const wbcl_tensor *lift, const int *labels, int classes,
                                   const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                                   void *user, wbcl_tensor *Z, wbcl_circulant **out);

/* Batched inference output: this rank's `rows` rows (0 allowed) of `row_elems` floats each (the
 * same row_elems everywhere), gathered in rank order on rank 0 (MPI_Gatherv of whole rows).
 * local_error as in wbcl_mpi_agree (the agreement comes first; a second one covers rank 0's
 * allocation). On rank 0 *all receives a malloc'd array of *total_rows rows (free it; NULL when
 * there are no rows); elsewhere *all = NULL and *total_rows = 0. Returns 0, or 1 after an agreed
 * failure. */
int wbcl_mpi_gather_rows(wbcl_mpi_job *job, const char *local_error, const float *local, size_t rows,
                         size_t row_elems, float **all, size_t *total_rows);

#ifdef __cplusplus
}
#endif
#endif
