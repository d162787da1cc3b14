/* wbcl_mpi: the MPI layer (include/wbcl/mpi.h). Uses only the public API of wbcl. */
#define _POSIX_C_SOURCE 200809L
#include "wbcl/mpi.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/device.h"

/* MPI counts are ints: long messages go in pieces of at most this many elements. */
#define CHUNK ((size_t)1 << 28)

void wbcl_mpi_job_init(wbcl_mpi_job *job, MPI_Comm comm)
{
    memset(job, 0, sizeof *job);
    job->comm = comm;
    MPI_Comm_rank(comm, &job->rank);
    MPI_Comm_size(comm, &job->size);
    job->failed_rank = -1;
}

int wbcl_mpi_agree(wbcl_mpi_job *job, const char *local_error)
{
    int mine = local_error ? job->rank : INT_MAX, first = INT_MAX;
    double t0 = MPI_Wtime();
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, job->comm);
    job->collectives++;
    if (first == INT_MAX) {
        job->seconds_in_collectives += MPI_Wtime() - t0;
        return 0;
    }
    char msg[WBCL_MPI_MESSAGE_MAX];
    memset(msg, 0, sizeof msg);
    if (job->rank == first) snprintf(msg, sizeof msg, "%s", local_error[0] ? local_error : "failed");
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, job->comm);
    msg[sizeof msg - 1] = '\0';
    job->failed_rank = first;
    memcpy(job->message, msg, sizeof msg);
    job->seconds_in_collectives += MPI_Wtime() - t0;
    return 1;
}

void wbcl_mpi_shard(size_t m, int rank, int size, size_t *begin, size_t *count)
{
    if (size < 1 || rank < 0 || rank >= size) {
        *begin = *count = 0;
        return;
    }
    const size_t p = (size_t)size, r = (size_t)rank, q = m / p, extra = m % p;
    *count = q + (r < extra);
    *begin = r * q + (r < extra ? r : extra);
}

int wbcl_mpi_device_selector(wbcl_mpi_job *job, const char *requested, char *sel, size_t selen, char *err,
                             size_t errlen)
{
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(job->comm, MPI_COMM_TYPE_SHARED, job->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    const char *env = getenv("WBCL_DEVICE");
    if (requested && requested[0]) {
        snprintf(sel, selen, "%s", requested);
        return 0;
    }
    if (env && env[0]) {
        snprintf(sel, selen, "%s", env);
        return 0;
    }
    wbcl_device_info *infos = NULL;
    size_t n = 0;
    if (wbcl_device_list(&infos, &n, err, errlen)) return 1;
    wbcl_device_list_free(infos);
    if (n == 0) {
        snprintf(err, errlen, "no OpenCL device on this node");
        return 1;
    }
    snprintf(sel, selen, "%zu", (size_t)local % n);
    return 0;
}

/* ---- the ReduNet construction ------------------------------------------------------------------ */

static const char *local_message(const wbcl_mpi_job *job)
{
    const char *m = job->ctx ? wbcl_context_last_error(job->ctx) : NULL;
    return m && m[0] ? m : "failed";
}

static int comm_sum(double *buf, size_t n, int failed, void *user)
{
    wbcl_mpi_job *job = user;
    if (wbcl_mpi_agree(job, failed ? local_message(job) : NULL)) return 1;
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_DOUBLE, MPI_SUM, job->comm);
    }
    job->bytes_reduced += n * sizeof *buf;
    job->seconds_in_collectives += MPI_Wtime() - t0;
    return 0;
}

static int comm_bcast(void *buf, size_t bytes, int failed, void *user)
{
    wbcl_mpi_job *job = user;
    if (wbcl_mpi_agree(job, failed ? local_message(job) : NULL)) return 1;
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
        MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, 0, job->comm);
    }
    job->bytes_broadcast += bytes;
    job->seconds_in_collectives += MPI_Wtime() - t0;
    return 0;
}

wbcl_status wbcl_mpi_redunet_fit(wbcl_mpi_job *job, wbcl_context *ctx, const wbcl_tensor *X, const int *labels,
                                 int classes, const wbcl_redunet_params *params, wbcl_mpi_build build,
                                 wbcl_redunet_progress_fn progress, void *user, wbcl_tensor *Z,
                                 wbcl_redunet **out)
{
    wbcl_redunet_comm comm;
    memset(&comm, 0, sizeof comm);
    comm.sum = comm_sum;
    comm.broadcast = build == WBCL_MPI_BUILD_ROOT ? comm_bcast : NULL;
    comm.root = job->rank == 0;
    comm.user = job;
    wbcl_context *saved = job->ctx;
    job->ctx = ctx;
    wbcl_status st = wbcl_redunet_fit_shard(ctx, X, labels, classes, params, &comm, progress, user, Z, out);
    job->ctx = saved;
    return st;
}

wbcl_status wbcl_mpi_circulant_fit(wbcl_mpi_job *job, wbcl_context *ctx, const wbcl_tensor *X,
                                   const wbcl_tensor *lift, const int *labels, int classes,
                                   const wbcl_circulant_params *params, wbcl_circulant_progress_fn progress,
                                   void *user, wbcl_tensor *Z, wbcl_circulant **out)
{
    wbcl_redunet_comm comm;
    memset(&comm, 0, sizeof comm);
    comm.sum = comm_sum;
    comm.root = job->rank == 0;
    comm.user = job;
    wbcl_context *saved = job->ctx;
    job->ctx = ctx;
    wbcl_status st = wbcl_circulant_fit_shard(ctx, X, lift, labels, classes, params, &comm, progress, user, Z, out);
    job->ctx = saved;
    return st;
}

/* ---- gathering rows ---------------------------------------------------------------------------- */

int wbcl_mpi_gather_rows(wbcl_mpi_job *job, const char *local_error, const float *local, size_t rows,
                         size_t row_elems, float **all, size_t *total_rows)
{
    *all = NULL;
    *total_rows = 0;
    if (!local_error && row_elems > (size_t)INT_MAX) local_error = "rows too long to gather";
    if (wbcl_mpi_agree(job, local_error)) return 1;
    double t0 = MPI_Wtime();
    unsigned long long mine = rows, *counts = NULL;
    if (job->rank == 0) counts = calloc((size_t)job->size, sizeof *counts);
    /* rank 0 with no memory for the counts still takes part (into a dummy) and fails below */
    unsigned long long dummy[1];
    MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, job->rank == 0 ? (counts ? counts : dummy) : NULL, 1,
               MPI_UNSIGNED_LONG_LONG, 0, job->comm);
    const char *err0 = NULL;
    float *buf = NULL;
    int *cnt = NULL, *displ = NULL;
    size_t total = 0;
    if (job->rank == 0) {
        if (!counts) err0 = "out of memory gathering the output";
        for (int r = 0; counts && r < job->size; r++) {
            if (counts[r] > (unsigned long long)INT_MAX || total > (size_t)INT_MAX) err0 = "too many rows to gather";
            total += (size_t)counts[r];
        }
        if (!err0) {
            cnt = malloc((size_t)job->size * sizeof *cnt);
            displ = malloc((size_t)job->size * sizeof *displ);
            if (total && total <= SIZE_MAX / sizeof(float) / (row_elems ? row_elems : 1))
                buf = malloc(total * row_elems * sizeof *buf);
            if (!cnt || !displ || (total && !buf)) err0 = "out of memory gathering the output";
        }
    }
    job->seconds_in_collectives += MPI_Wtime() - t0;
    if (wbcl_mpi_agree(job, err0)) {
        free(counts);
        free(cnt);
        free(displ);
        free(buf);
        return 1;
    }
    t0 = MPI_Wtime();
    MPI_Datatype row;
    MPI_Type_contiguous((int)row_elems, MPI_FLOAT, &row);
    MPI_Type_commit(&row);
    if (job->rank == 0) {
        size_t at = 0;
        for (int r = 0; r < job->size; r++) {
            cnt[r] = (int)counts[r];
            displ[r] = (int)at;
            at += (size_t)counts[r];
        }
    }
    MPI_Gatherv(local, (int)rows, row, buf, cnt, displ, row, 0, job->comm);
    MPI_Type_free(&row);
    job->seconds_in_collectives += MPI_Wtime() - t0;
    free(counts);
    free(cnt);
    free(displ);
    if (job->rank == 0) {
        *all = buf;
        *total_rows = total;
    }
    return 0;
}
