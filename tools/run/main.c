/* wbcl-run: runs one module (an operator, a block, a model, or the `check` job) on a device,
 * reading .npy inputs and safetensors weights and writing the .npy result (SPEC §6.3).
 *
 *   wbcl-run [--device SEL] [--variant cpu|gpu|auto] MODULE [--weights W.safetensors]
 *            [--input X.npy]... [--output Y.npy] [--param NAME=VALUE]... [--verify] [--quiet]
 *   wbcl-run --list
 *   wbcl-run MODULE --help
 *
 * Exit status 0 on success; otherwise 1 (2 for a malformed command line) with exactly one line
 * "wbcl-run: <reason>" on stderr. --output is only written when the module succeeded. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#ifdef WBCL_RUN_MPI /* wbcl-run-mpi: the same program under mpirun (tools/run-mpi/par.c) */
#include "par.h"
#define TOOL "wbcl-run-mpi"
#else
#define TOOL "wbcl-run"
#endif

enum { EXIT_RUN_FAIL = 1, EXIT_USAGE = 2 };

static const char general_usage[] =
    "usage: wbcl-run [--device SEL] [--variant cpu|gpu|auto] MODULE [--weights W.safetensors]\n"
    "                [--input X.npy]... [--output Y.npy] [--param NAME=VALUE]... [--verify] [--quiet]\n"
    "       wbcl-run --list          list the modules\n"
    "       wbcl-run MODULE --help   a module's inputs, weights and params\n"
    "\n"
    "  --device SEL        device index, P:D, name substring, cpu or gpu (default: $WBCL_DEVICE,\n"
    "                      else the first GPU, else the first device; see wbcl-info)\n"
    "  --variant V         kernel family of the ops: cpu (CPU-shaped), gpu (GPU-shaped) or auto (by\n"
    "                      device type); overrides $WBCL_VARIANT (default: it, else auto)\n"
    "  --weights FILE      safetensors file with the module's weights (PyTorch state_dict keys)\n"
    "  --input FILE        .npy input (f4, f8, f2, i4 or i8; converted to float32); repeat for more\n"
    "  --output FILE       .npy result (float32); written only if the run succeeds\n"
    "  --param NAME=VALUE  a module parameter; repeat, or list several after one --param\n"
    "  --verify            also compute the double-precision reference on the host and compare\n"
    "  --quiet             print nothing but errors (and verify failures)\n"
    "Exit status 0 on success, else non-zero with a one-line reason on stderr.\n";

/* Prints the reason as one line: newlines in library messages (build logs) become " | ". */
static void print_reason(const char *msg)
{
    fputs(TOOL ": ", stderr);
    const char *p = msg;
    int pending_sep = 0, wrote = 0;
    for (; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            pending_sep = wrote;
            continue;
        }
        if (pending_sep) {
            fputs(" | ", stderr);
            pending_sep = 0;
        }
        fputc(*p == '\t' ? ' ' : *p, stderr);
        wrote = 1;
    }
    if (!wrote) fputs("failed", stderr);
    fputc('\n', stderr);
}

static void list_modules(void)
{
    size_t w = 0;
    for (size_t i = 0; i < wbcl_run_module_count(); i++) {
        size_t l = strlen(wbcl_run_module_at(i)->name);
        if (l > w) w = l;
    }
    printf("modules (wbcl-run MODULE --help for details):\n");
    for (size_t i = 0; i < wbcl_run_module_count(); i++) {
        const wbcl_run_module *m = wbcl_run_module_at(i);
        printf("  %-*s  %s\n", (int)w, m->name, m->summary);
    }
}

static void module_help(const wbcl_run_module *m)
{
    printf("wbcl-run %s: %s\n\n%s", m->name, m->summary, m->usage);
    size_t ul = strlen(m->usage);
    if (ul && m->usage[ul - 1] != '\n') putchar('\n');
    printf("\ncommon options: --device SEL, --variant cpu|gpu|auto%s%s%s%s, --quiet (wbcl-run --help for all)\n",
           m->weights ? ", --weights FILE" : "", m->max_inputs ? ", --input FILE" : "",
           m->output ? ", --output FILE" : "", m->can_verify ? ", --verify" : "");
}

/* Adds NAME=VALUE to the params; 0 or fails. */
static int add_param(wbcl_run *r, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return wbcl_run_fail(r, "--param takes NAME=VALUE, got '%s'", kv);
    if (r->n_params >= WBCL_RUN_MAX_ARGS) return wbcl_run_fail(r, "too many --param");
    size_t nl = (size_t)(eq - kv);
    char *name = malloc(nl + 1);
    if (!name) return wbcl_run_fail(r, "out of memory");
    memcpy(name, kv, nl);
    name[nl] = '\0';
    for (int i = 0; i < r->n_params; i++)
        if (!strcmp(r->params[i].name, name)) {
            wbcl_run_fail(r, "--param %s given twice", name);
            free(name);
            return 1;
        }
    r->params[r->n_params].name = name;
    r->params[r->n_params].value = eq + 1;
    r->n_params++;
    return 0;
}

typedef struct cmdline {
    const char *module;
    int list, help;
} cmdline;

static int parse(wbcl_run *r, cmdline *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h")) {
            c->help = 1;
            continue;
        }
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            char name[64];
            const char *inl = strchr(a, '=');
            size_t nl = inl ? (size_t)(inl - a - 2) : strlen(a + 2);
            if (nl >= sizeof name) return wbcl_run_fail(r, "unknown option '%s'", a);
            memcpy(name, a + 2, nl);
            name[nl] = '\0';
            int *flag = !strcmp(name, "list") ? &c->list : !strcmp(name, "help") ? &c->help
                      : !strcmp(name, "verify") ? &r->verify : !strcmp(name, "quiet") ? &r->quiet : NULL;
            if (flag) {
                if (inl) return wbcl_run_fail(r, "option --%s takes no value", name);
                *flag = 1;
                continue;
            }
            const char *v = inl ? inl + 1 : NULL;
            if (!v) {
                if (i + 1 >= argc) return wbcl_run_fail(r, "option --%s needs a value", name);
                v = argv[++i];
            }
            if (!strcmp(name, "device")) {
                if (r->device) return wbcl_run_fail(r, "--device given twice");
                r->device = v;
            } else if (!strcmp(name, "variant")) {
                if (r->variant) return wbcl_run_fail(r, "--variant given twice");
                wbcl_variant var;
                if (wbcl_variant_parse(v, &var))
                    return wbcl_run_fail(r, "--variant must be cpu, gpu or auto, got '%s'", v);
                r->variant = wbcl_variant_name(var);
            } else if (!strcmp(name, "weights")) {
                if (r->weights_path) return wbcl_run_fail(r, "--weights given twice");
                r->weights_path = v;
            } else if (!strcmp(name, "output")) {
                if (r->output_path) return wbcl_run_fail(r, "--output given twice");
                r->output_path = v;
            } else if (!strcmp(name, "input")) {
                if (r->n_inputs >= WBCL_RUN_MAX_ARGS) return wbcl_run_fail(r, "too many --input");
                r->inputs[r->n_inputs++] = v;
            } else if (!strcmp(name, "param")) {
                if (add_param(r, v)) return 1;
                /* `--param a=1 b=2`: following NAME=VALUE words belong to it too */
                while (i + 1 < argc && argv[i + 1][0] != '-' && strchr(argv[i + 1], '='))
                    if (add_param(r, argv[++i])) return 1;
            } else {
                /* a module-specific option; checked against the module's list once it is known */
                if (r->n_options >= WBCL_RUN_MAX_ARGS) return wbcl_run_fail(r, "too many options");
                for (int k = 0; k < r->n_options; k++)
                    if (!strcmp(r->options[k].name, name)) return wbcl_run_fail(r, "--%s given twice", name);
                char *stored = malloc(nl + 1);
                if (!stored) return wbcl_run_fail(r, "out of memory");
                memcpy(stored, name, nl + 1);
                r->options[r->n_options].name = stored;
                r->options[r->n_options].value = v;
                r->n_options++;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) return wbcl_run_fail(r, "unknown option '%s' (wbcl-run --help shows usage)", a);
        if (c->module)
            return wbcl_run_fail(r, "unexpected argument '%s' after module '%s' (files go after --input, "
                                    "--weights or --output)", a, c->module);
        c->module = a;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static wbcl_run run; /* large: keep it off the stack */
    wbcl_run *r = &run;
    cmdline c = {0};
    int rc = 0, opened = 0;
#ifdef WBCL_RUN_MPI
    wbcl_run_mpi_init(&argc, &argv, r);
#else
    /* Started as one of several MPI ranks: every rank would run the whole job and write the same
     * output file. The ranks share the work only through wbcl-run-mpi (-DWBCL_MPI=ON). */
    {
        static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
        for (int i = 0; size_vars[i]; i++) {
            const char *v = getenv(size_vars[i]);
            if (v && atol(v) > 1) {
                wbcl_run_fail(r, "started as one of %ld MPI ranks (%s): wbcl-run would run the whole job on "
                                 "every rank; use mpirun ... wbcl-run-mpi (build with -DWBCL_MPI=ON), which splits "
                                 "the samples across the ranks",
                              atol(v), size_vars[i]);
                rc = EXIT_USAGE;
                goto out;
            }
        }
    }
#endif

    if (parse(r, &c, argc, argv)) {
        rc = EXIT_USAGE;
        goto out;
    }
    /* --variant: every context this process opens starts with it (the library reads $WBCL_VARIANT
     * in wbcl_context_create), so it also replaces a bad value there */
    if (r->variant && setenv("WBCL_VARIANT", r->variant, 1)) {
        wbcl_run_fail(r, "cannot set WBCL_VARIANT for --variant %s: %s", r->variant, strerror(errno));
        rc = EXIT_RUN_FAIL;
        goto out;
    }
    if (c.list) {
        list_modules();
        goto out;
    }
    if (!c.module) {
        if (c.help) {
            fputs(general_usage, stdout);
            goto out;
        }
        wbcl_run_fail(r, "no module given (wbcl-run --list lists them, wbcl-run --help shows usage)");
        rc = EXIT_USAGE;
        goto out;
    }
    const wbcl_run_module *m = wbcl_run_module_find(c.module);
    if (!m) {
        char names[1024] = "";
        size_t n = 0;
        for (size_t i = 0; i < wbcl_run_module_count() && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", wbcl_run_module_at(i)->name);
        wbcl_run_fail(r, "unknown module '%s' (modules: %s; wbcl-run --list describes them)", c.module, names);
        rc = EXIT_USAGE;
        goto out;
    }
    r->mod = m;
    if (c.help) {
        module_help(m);
        goto out;
    }
    if (wbcl_run_validate(r, m)) {
        rc = EXIT_USAGE;
        goto out;
    }
#ifdef WBCL_RUN_MPI
    if (wbcl_run_mpi_allowed(r, m)) {
        rc = EXIT_USAGE;
        goto out;
    }
    opened = 1; /* from here on every failure is agreed on by all ranks */
    /* only rank 0 writes --output */
    if (wbcl_run_mpi_open(r, r->par->rank == 0 && r->output_path && wbcl_run_check_output_path(r, r->output_path)
                                 ? r->err : NULL)) {
        rc = EXIT_RUN_FAIL;
        goto out;
    }
#else
    if (r->output_path && wbcl_run_check_output_path(r, r->output_path)) {
        rc = EXIT_RUN_FAIL;
        goto out;
    }
    char err[4096] = "";
    if (wbcl_context_create(r->device, &r->ctx, err, sizeof err)) {
        wbcl_run_fail(r, "%s", err[0] ? err : "cannot open an OpenCL context");
        rc = EXIT_RUN_FAIL;
        goto out;
    }
    opened = 1;
#endif
    {
        /* a forced kernel family is said, so that results are not taken for the device's default */
        const char *ev = getenv("WBCL_VARIANT");
        if (r->variant || (ev && *ev))
            wbcl_run_info(r, "kernel variant: %s-shaped (%s%s)\n", wbcl_variant_name(wbcl_context_variant(r->ctx)),
                          r->variant ? "--variant " : "$WBCL_VARIANT=", r->variant ? r->variant : ev);
    }
    fflush(stdout);
    if (m->run(r)) {
        if (!r->err[0]) wbcl_run_fail(r, "module '%s' failed", m->name);
        rc = EXIT_RUN_FAIL;
    }

out:
    fflush(stdout);
#ifdef WBCL_RUN_MPI
    rc = wbcl_run_mpi_finish(r, rc, opened);
    if (rc && wbcl_run_mpi_prints(r)) print_reason(r->err);
#else
    (void)opened;
    if (rc) print_reason(r->err);
#endif
    wbcl_safetensors_close(r->weights);
    wbcl_context_destroy(r->ctx);
    for (int i = 0; i < r->n_params; i++) free((char *)r->params[i].name);
    for (int i = 0; i < r->n_options; i++) free((char *)r->options[i].name);
#ifdef WBCL_RUN_MPI
    wbcl_run_mpi_end();
#endif
    return rc;
}
