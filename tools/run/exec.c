/* wbcl-run's checks of a command against a module's descriptor, and the in-process entry point
 * (wbcl_run_exec) through which other programs run a module on a context they hold: the Python
 * package (python/wbcl) calls it through libwbcl_run. registry.h documents both. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"

static int name_in(const char *const *list, const char *name)
{
    for (size_t i = 0; list && list[i]; i++)
        if (!strcmp(list[i], name)) return 1;
    return 0;
}

static void join(char *buf, size_t len, const char *const *list, const char *prefix)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; list && list[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s%s", i ? ", " : "", prefix, list[i]);
}

/* The directory of --output must exist and be writable; the path must not be a directory.
 * Checked before any work so that a long run does not fail at the end. Creates nothing. */
int wbcl_run_check_output_path(wbcl_run *r, const char *path)
{
    struct stat sb;
    if (!path[0]) return wbcl_run_fail(r, "--output: empty path");
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return wbcl_run_fail(r, "cannot write --output '%s': it is a directory", path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &sb) != 0)
        return wbcl_run_fail(r, "cannot write --output '%s': directory '%s' %s", path, dir,
                             errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return wbcl_run_fail(r, "cannot write --output '%s': '%s' is not a directory", path, dir);
    if (access(dir, W_OK) != 0)
        return wbcl_run_fail(r, "cannot write --output '%s': directory '%s' is not writable", path, dir);
    return 0;
}

/* Checks the command line against the module's descriptor. */
int wbcl_run_validate(wbcl_run *r, const wbcl_run_module *m)
{
    char list[1024];
    if (r->n_inputs < m->min_inputs || r->n_inputs > m->max_inputs) {
        if (m->max_inputs == 0) return wbcl_run_fail(r, "module '%s' takes no --input", m->name);
        if (m->min_inputs == m->max_inputs)
            return wbcl_run_fail(r, "module '%s' takes %d --input file%s, got %d (wbcl-run %s --help)", m->name,
                                 m->min_inputs, m->min_inputs == 1 ? "" : "s", r->n_inputs, m->name);
        return wbcl_run_fail(r, "module '%s' takes %d to %d --input files, got %d (wbcl-run %s --help)", m->name,
                             m->min_inputs, m->max_inputs, r->n_inputs, m->name);
    }
    if (r->weights_path && m->weights == WBCL_RUN_NONE)
        return wbcl_run_fail(r, "module '%s' takes no --weights", m->name);
    if (!r->weights_path && m->weights == WBCL_RUN_REQUIRED)
        return wbcl_run_fail(r, "module '%s' needs --weights FILE.safetensors", m->name);
    if (r->output_path && m->output == WBCL_RUN_NONE)
        return wbcl_run_fail(r, "module '%s' writes no --output", m->name);
    if (!r->output_path && m->output == WBCL_RUN_REQUIRED)
        return wbcl_run_fail(r, "module '%s' needs --output FILE", m->name);
    if (r->verify && !m->can_verify) return wbcl_run_fail(r, "module '%s' has no --verify", m->name);
    for (int i = 0; i < r->n_params; i++) {
        if (name_in(m->params, r->params[i].name)) continue;
        if (!m->params || !m->params[0])
            return wbcl_run_fail(r, "unknown param '%s': module '%s' takes no params", r->params[i].name, m->name);
        join(list, sizeof list, m->params, "");
        return wbcl_run_fail(r, "unknown param '%s' for module '%s' (known: %s)", r->params[i].name, m->name, list);
    }
    for (int i = 0; i < r->n_options; i++) {
        const char *name = r->options[i].name;
        if (!name_in(m->options, name)) {
            if (!m->options || !m->options[0])
                return wbcl_run_fail(r, "unknown option '--%s' (wbcl-run %s --help shows usage)", name, m->name);
            join(list, sizeof list, m->options, "--");
            return wbcl_run_fail(r, "unknown option '--%s' for module '%s' (its own options: %s)", name, m->name,
                                 list);
        }
    }
    return 0;
}

int wbcl_run_exec(wbcl_context *ctx, const char *module, int n_inputs, const char *const *inputs, const char *weights,
                  const char *output, int n_params, const char *const *names, const char *const *values,
                  int n_options, const char *const *option_names, const char *const *option_values, int verify,
                  char *err, size_t errlen)
{
    wbcl_run *r = calloc(1, sizeof *r); /* large: off the stack */
    int rc = 1;
    if (!r) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return 1;
    }
    const wbcl_run_module *m = module ? wbcl_run_module_find(module) : NULL;
    if (!ctx) {
        wbcl_run_fail(r, "no context");
    } else if (!m) {
        wbcl_run_fail(r, "unknown module '%s' (wbcl_run_module_at lists them)", module ? module : "(null)");
    } else if (n_inputs < 0 || n_inputs > WBCL_RUN_MAX_ARGS || n_params < 0 || n_params > WBCL_RUN_MAX_ARGS ||
               n_options < 0 || n_options > WBCL_RUN_MAX_ARGS) {
        wbcl_run_fail(r, "too many inputs, params or options (at most %d each)", WBCL_RUN_MAX_ARGS);
    } else {
        r->mod = m;
        r->ctx = ctx;
        r->quiet = 1; /* the caller reports; nothing is printed */
        r->verify = verify != 0;
        r->weights_path = weights;
        r->output_path = output;
        r->n_inputs = n_inputs;
        for (int i = 0; i < n_inputs; i++) r->inputs[i] = inputs[i];
        int bad = 0;
        for (int i = 0; i < n_params && !bad; i++) {
            for (int j = 0; j < i && !bad; j++)
                if (!strcmp(names[j], names[i])) bad = wbcl_run_fail(r, "param %s given twice", names[i]);
            r->params[i].name = names[i];
            r->params[i].value = values[i];
        }
        r->n_params = n_params;
        for (int i = 0; i < n_options; i++) {
            r->options[i].name = option_names[i];
            r->options[i].value = option_values[i];
        }
        r->n_options = n_options;
        if (!bad && !wbcl_run_validate(r, m) && !(output && wbcl_run_check_output_path(r, output))) {
            rc = m->run(r);
            if (rc && !r->err[0]) wbcl_run_fail(r, "module '%s' failed", m->name);
        }
    }
    if (err && errlen) snprintf(err, errlen, "%s", rc ? r->err : "");
    wbcl_safetensors_close(r->weights);
    free(r);
    return rc ? 1 : 0;
}
