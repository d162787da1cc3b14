/* wbcl-bench, driven as a subprocess on small sizes (--quick): every operator of --list
 * appears once per device, verified ("ok") or with an explicit "unsupported" reason; the CSV,
 * JSON and SVG outputs carry the format version and parse; bad command lines fail cleanly. */
#define _XOPEN_SOURCE 700
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define TOOL WBCL_TOOLS_DIR "/wbcl-bench"

static char dir[256];
static char out[1 << 18], err[1 << 14];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static const char *P(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static char *slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static int run(const char *first, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = TOOL;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(P(".out"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(P(".err"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(TOOL, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "wbcl-bench died with signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    slurp(P(".out"), out, sizeof out);
    slurp(P(".err"), err, sizeof err);
    return WEXITSTATUS(status);
}

/* operator names from --list */
static int list_ops(char names[][64], int cap)
{
    ck_assert_int_eq(run("--list", NULL), 0);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line && n < cap; line = strtok_r(NULL, "\n", &save)) {
        ck_assert_int_eq(sscanf(line, "%63s", names[n]), 1);
        n++;
    }
    return n;
}

START_TEST(quick_run_all_formats)
{
    snprintf(dir, sizeof dir, "/tmp/wbcl-test-bench-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static char names[128][64];
    int nops = list_ops(names, 128);
    ck_assert_int_ge(nops, 42);
    const char *dev = getenv("WBCL_TEST_DEVICE");
    int rc = run("--quick", "--reps", "2", "--device", dev && *dev ? dev : "0", "--csv", P("r.csv"), "--json",
                 P("r.json"), "--plot", P("r.svg"), NULL);
    ck_assert_msg(rc == 0, "wbcl-bench failed (%d): %s\n%s", rc, err, out);
    /* the table: a header naming the device and driver, a row per operator */
    ck_assert_ptr_nonnull(strstr(out, "driver"));
    ck_assert_ptr_nonnull(strstr(out, "measured peak"));
    for (int i = 0; i < nops; i++) ck_assert_msg(strstr(out, names[i]) != NULL, "table lacks %s", names[i]);

    /* CSV: version line, header, one row per operator with status ok or unsupported */
    static char csv[1 << 18];
    ck_assert_ptr_nonnull(slurp(P("r.csv"), csv, sizeof csv));
    ck_assert_msg(strncmp(csv, "# wbcl-bench format 1\n", 22) == 0, "CSV starts '%.40s'", csv);
    char *save = NULL;
    char *line = strtok_r(csv, "\n", &save); /* version */
    line = strtok_r(NULL, "\n", &save);      /* header */
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strncmp(line, "format_version,device_index,device,driver,op,", 45) == 0, "header: %s", line);
    int rows = 0, ok = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        rows++;
        ck_assert_msg(strncmp(line, "1,", 2) == 0, "row without format version: %s", line);
        int has_ok = strstr(line, ",ok,") != NULL, has_uns = strstr(line, ",unsupported,") != NULL;
        ck_assert_msg(has_ok || has_uns, "row neither ok nor unsupported: %s", line);
        if (has_ok) {
            ok++;
            ck_assert_msg(strstr(line, "GFLOP/s") || strstr(line, "GB/s"), "ok row without a rate unit: %s", line);
        }
    }
    ck_assert_int_eq(rows, nops);
    ck_assert_int_ge(ok, 1);

    /* JSON: parses, format and version, devices with peaks, one result per operator */
    static char js[1 << 18];
    ck_assert_ptr_nonnull(slurp(P("r.json"), js, sizeof js));
    cJSON *root = cJSON_Parse(js);
    ck_assert_msg(root != NULL, "JSON does not parse");
    ck_assert_str_eq(cJSON_GetObjectItem(root, "format")->valuestring, "wbcl-bench");
    ck_assert_int_eq(cJSON_GetObjectItem(root, "format_version")->valueint, 1);
    cJSON *devs = cJSON_GetObjectItem(root, "devices"), *res = cJSON_GetObjectItem(root, "results");
    ck_assert_int_eq(cJSON_GetArraySize(devs), 1);
    ck_assert(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetArrayItem(devs, 0), "driver")));
    ck_assert_int_eq(cJSON_GetArraySize(res), nops);
    /* issue 7: every operator family is in the table and verified on the test device (PoCL CPU has all
     * of them: an "unsupported" or missing row here is a regression) */
    static const char *required[] = {"circulant.lift_1d",      "circulant.lift_2d",  "circulant.construct_1d",
                                     "circulant.construct_2d", "circulant.apply_1d", "circulant.apply_2d",
                                     "model.crate_forward",    "model.tost_forward", "redunet.construct",
                                     "redunet.apply"};
    for (size_t q = 0; q < sizeof required / sizeof required[0]; q++) {
        int found = 0;
        for (int i = 0; i < nops; i++) {
            cJSON *r = cJSON_GetArrayItem(res, i);
            if (strcmp(cJSON_GetObjectItem(r, "op")->valuestring, required[q])) continue;
            found = 1;
            ck_assert_msg(!strcmp(cJSON_GetObjectItem(r, "status")->valuestring, "ok"), "%s: %s (%s)", required[q],
                          cJSON_GetObjectItem(r, "status")->valuestring, cJSON_GetObjectItem(r, "reason")->valuestring);
            ck_assert_msg(cJSON_GetObjectItem(r, "rel_err")->valuedouble <= cJSON_GetObjectItem(r, "tolerance")->valuedouble,
                          "%s not verified", required[q]);
            ck_assert_str_eq(cJSON_GetObjectItem(r, "unit")->valuestring, "GFLOP/s");
        }
        ck_assert_msg(found, "wbcl-bench has no %s row", required[q]);
    }
    for (int i = 0; i < nops; i++) {
        cJSON *r = cJSON_GetArrayItem(res, i);
        const char *st = cJSON_GetObjectItem(r, "status")->valuestring;
        ck_assert_str_eq(cJSON_GetObjectItem(r, "op")->valuestring, names[i]);
        if (!strcmp(st, "ok")) {
            double e = cJSON_GetObjectItem(r, "rel_err")->valuedouble, t = cJSON_GetObjectItem(r, "tolerance")->valuedouble;
            ck_assert_msg(e <= t, "%s: error %g above tolerance %g but ok", names[i], e, t);
            ck_assert(cJSON_GetObjectItem(r, "wall_ms")->valuedouble > 0);
            ck_assert(cJSON_GetObjectItem(r, "rate")->valuedouble > 0);
        } else {
            ck_assert_str_eq(st, "unsupported");
            ck_assert_msg(strlen(cJSON_GetObjectItem(r, "reason")->valuestring) > 0, "%s: no reason", names[i]);
        }
    }
    cJSON_Delete(root);

    /* SVG: a document naming every operator */
    static char svg[1 << 18];
    ck_assert_ptr_nonnull(slurp(P("r.svg"), svg, sizeof svg));
    ck_assert(strncmp(svg, "<svg ", 5) == 0);
    ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
    for (int i = 0; i < nops; i++) ck_assert_msg(strstr(svg, names[i]) != NULL, "SVG lacks %s", names[i]);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

START_TEST(filter_and_bad_command_lines)
{
    snprintf(dir, sizeof dir, "/tmp/wbcl-test-bench-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* --op selects operators (comma-separated substrings: an op matching any runs); only those rows appear */
    ck_assert_int_eq(run("--quick", "--reps", "1", "--device", "0", "--op", "linalg.,relu", "--csv", P("l.csv"), NULL), 0);
    static char csv[1 << 16];
    ck_assert_ptr_nonnull(slurp(P("l.csv"), csv, sizeof csv));
    ck_assert_ptr_nonnull(strstr(csv, "linalg.cholesky"));
    ck_assert_ptr_nonnull(strstr(csv, ",relu,"));
    ck_assert_ptr_null(strstr(csv, "gemm.packed"));
    ck_assert_ptr_null(strstr(csv, "gelu"));
    ck_assert_int_eq(run("--reps", "0", NULL), 2);
    ck_assert_ptr_nonnull(strstr(err, "--reps"));
    ck_assert_int_eq(run("--op", "no-such-op", NULL), 2);
    ck_assert_ptr_nonnull(strstr(err, "no-such-op"));
    ck_assert_int_eq(run("--frobnicate", NULL), 2);
    ck_assert_ptr_nonnull(strstr(err, "--frobnicate"));
    ck_assert_int_eq(run("--variant", "sideways", NULL), 2); /* refused before any device work */
    ck_assert_ptr_nonnull(strstr(err, "--variant"));
    ck_assert_ptr_nonnull(strstr(err, "cpu, gpu or auto"));
    ck_assert_int_eq(run("--device", "no-such-device-xyz", "--quick", NULL), 1);
    ck_assert_ptr_nonnull(strstr(err, "no-such-device-xyz"));
    ck_assert_int_eq(run("--quick", "--op", "relu", "--device", "0", "--csv", "/proc/no/such/dir/x.csv", NULL), 1);
    ck_assert_ptr_nonnull(strstr(err, "/proc/no/such/dir/x.csv"));
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, quick_run_all_formats);
    tcase_add_test(tc, filter_and_bad_command_lines);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
