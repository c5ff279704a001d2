/* SPDX-License-Identifier: Apache-2.0
 * planner: the plan object (sp_plan.h). The module is printed and hashed
 * once here; the plan document reuses that hash instead of printing again. */
#include "sp_plan.h"

#include <string.h>

#include "sp_mlir.h"

struct sp_plan {
    sp_input in;
    sp_plan_pass pass;
    bool written;                          /* sp_plan_write ran: the module is propagated */
    char key[2 * CM_SHA256_LEN + 1];       /* module text, pass, key_extra */
    char input_sha[2 * CM_SHA256_LEN + 1]; /* module text, pass */
};

cm_status sp_plan_create(const char *text, size_t len, const sp_input_opts *o,
                         const char *key_extra, size_t key_extra_len, sp_plan **out,
                         cm_error *err)
{
    *out = NULL;
    sp_input_opts io;
    if (o != NULL) {
        io = *o;
    } else {
        sp_input_opts_init(&io);
    }
    io.propagate = false;
    sp_plan *p = cm_calloc(1, sizeof *p);
    if (p == NULL) {
        return cm_error_oom(err);
    }
    p->pass = io.pass;
    cm_status st = sp_input_read(text, len, &io, &p->in, err);
    if (st != CM_OK) {
        cm_free(p);
        return st;
    }
    /* the text the hashes cover: the module as MLIR, then the pass (the
     * document's input_sha256), then what the text does not show (the key).
     * One SHA-256 pass over the module text: the key's state continues from
     * a copy of the input hash's. */
    cm_buf txt;
    cm_buf_init(&txt);
    sp_print_opts popts = {false, false};
    sp_mlir_print(p->in.m, &popts, &txt);
    cm_buf_puts(&txt, "\n// pass: ");
    cm_buf_puts(&txt, sp_plan_pass_name(p->pass));
    if (!txt.oom) {
        cm_sha256 h;
        cm_sha256_init(&h);
        cm_sha256_update(&h, txt.data, txt.len);
        cm_sha256 key = h;
        uint8_t dig[CM_SHA256_LEN];
        cm_sha256_final(&h, dig);
        cm_sha256_to_hex(dig, p->input_sha);
        if (key_extra != NULL && key_extra_len > 0) {
            char hx[2 * CM_SHA256_LEN + 1];
            cm_sha256_hex(key_extra, key_extra_len, hx);
            cm_sha256_update(&key, "\n// document: ", strlen("\n// document: "));
            cm_sha256_update(&key, hx, 2 * CM_SHA256_LEN);
            cm_sha256_final(&key, dig);
            cm_sha256_to_hex(dig, p->key);
        } else {
            memcpy(p->key, p->input_sha, sizeof p->key);
        }
    }
    bool oom = txt.oom;
    cm_buf_fini(&txt);
    if (oom) {
        sp_plan_destroy(p);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory hashing the module");
    }
    *out = p;
    return CM_OK;
}

void sp_plan_destroy(sp_plan *p)
{
    if (p == NULL) {
        return;
    }
    sp_input_fini(&p->in);
    cm_free(p);
}

const char *sp_plan_key(const sp_plan *p)
{
    return p->key;
}

const char *sp_plan_input_sha256(const sp_plan *p)
{
    return p->input_sha;
}

sp_plan_pass sp_plan_get_pass(const sp_plan *p)
{
    return p->pass;
}

const sp_input *sp_plan_input(const sp_plan *p)
{
    return &p->in;
}

cm_status sp_plan_write(sp_plan *p, const cm_cancel *cancel, cm_buf *out, sp_plan_timing *timing,
                        cm_error *err)
{
    if (p->written) {
        return cm_error_set(err, CM_EINVAL, NULL, "the plan is already written");
    }
    p->written = true;
    sp_plan_opts o;
    sp_plan_opts_init(&o);
    o.pass = p->pass;
    o.custom = p->in.custom;
    o.graph = p->in.g;
    o.functions_form = p->in.functions_form;
    o.timing = timing;
    o.input_sha256 = p->input_sha;
    o.cancel = cancel;
    return sp_plan_run(p->in.m, &o, out, err);
}
