/* The knowledge base's checks of the data against the code's vocabulary: every name
 * recipes/signatures.json uses must exist in the code, and a name only the data has fails the
 * load with a message naming it, instead of being judged "unknown" forever. */
#include <jansson.h>
#include <string.h>
#include "diagnose/knowledge_load.h"
#include "recipes/recipes.h"
#include "unit.h"

/* The embedded data with EDIT applied to the entry ID; returns the load's status and message. */
static md_status load_edited(const char *id, void (*edit)(json_t *entry), char *message, size_t size)
{
    md_error err;
    md_error_clear(&err);
    json_t *doc = md_recipe_load("signatures.json", &err);
    ck_assert_ptr_nonnull(doc);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "signatures"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "id")), id) == 0)
            edit(e);
    }
    md_knowledge kb;
    md_status st = md_knowledge_load_doc(&kb, doc, &err);
    if (st == MD_OK)
        md_knowledge_free(&kb);
    snprintf(message, size, "%s", err.message);
    return st;
}

static void nothing(json_t *e) { (void)e; }
static void unknown_fact(json_t *e) { json_array_append_new(json_object_get(e, "confirm"), json_string("binary_is_purple")); }
static void unknown_placeholder(json_t *e) { json_array_append_new(json_object_get(e, "fix"), json_string("run {frobnicate}")); }
/* The first text of a list, as well as the ones after it (the checks once began at the second). */
static void unknown_placeholder_first_fix(json_t *e) { json_array_insert_new(json_object_get(e, "fix"), 0, json_string("run {frobnicate}")); }
static void unknown_placeholder_first_note(json_t *e) { json_array_insert_new(json_object_get(e, "notes"), 0, json_string("see {frobnicate}")); }
static void unknown_alternative(json_t *e) { json_array_append_new(json_object_get(e, "fix"), json_string("run {gpu_arch|nope}")); }
static void missing_capture(json_t *e) { json_array_append_new(json_object_get(e, "fix"), json_string("fix {im2col_step}")); }
static void unknown_evidence(json_t *e) { json_object_set_new(e, "evidence", json_pack("[s]", "horoscope")); }
static void unknown_gpu_choice(json_t *e) { json_object_set_new(e, "gpu", json_pack("[s]", "fastest")); }
static void unknown_hint(json_t *e)
{
    json_t *pro = json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(e, "readings"), 0), "causes"), 0), "for");
    json_array_append_new(pro, json_string("hint:no_such_hint"));
}
static void unknown_finding(json_t *e)
{
    json_object_set_new(json_array_get(json_object_get(json_array_get(json_object_get(e, "readings"), 0), "causes"), 1),
                        "finding", json_string("no-such-finding"));
}
static void unknown_when(json_t *e)
{
    json_object_set_new(e, "causes", json_pack("[{s:[s], s:s}]", "when", "!gpu_is_happy", "text", "t"));
}

START_TEST(embedded_data_loads)
{
    char msg[512];
    ck_assert_int_eq(load_edited("no-kernel-image", nothing, msg, sizeof msg), MD_OK);
}
END_TEST

START_TEST(names_the_code_lacks_fail_the_load)
{
    static const struct {
        const char *id;
        void (*edit)(json_t *);
        const char *says;
    } cases[] = {
        { "no-kernel-image", unknown_fact, "the fact key 'binary_is_purple', which the code lacks" },
        { "no-kernel-image", unknown_placeholder, "the placeholder '{frobnicate}', which the code lacks" },
        { "no-kernel-image", unknown_placeholder_first_fix, "the placeholder '{frobnicate}', which the code lacks" },
        { "launch-out-of-resources", unknown_placeholder_first_note, "the placeholder '{frobnicate}', which the code lacks" },
        { "no-kernel-image", unknown_alternative, "the placeholder '{nope}', which the code lacks" },
        { "no-kernel-image", missing_capture, "'{im2col_step}', which needs the capture 'im2col_numbers'" },
        { "dtype-mismatch", unknown_evidence, "the evidence 'horoscope', which the code lacks" },
        { "dtype-mismatch", unknown_gpu_choice, "the GPU choice 'fastest', which the code lacks" },
        { "cuda-unavailable-at-build", unknown_hint, "the hint 'no_such_hint', which log_hints lacks" },
        { "shared-lib-not-found", unknown_finding, "as 'no-such-finding', which is no finding ID" },
        { "magma-missing", unknown_when, "the fact key 'gpu_is_happy', which the code lacks" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512];
        ck_assert_int_eq(load_edited(cases[i].id, cases[i].edit, msg, sizeof msg), MD_ERR_INTERNAL);
        ck_assert_msg(strstr(msg, cases[i].says) != NULL, "case %zu: '%s'", i, msg);
        ck_assert_msg(strstr(msg, cases[i].id) != NULL, "case %zu names no ID: '%s'", i, msg);
    }
}
END_TEST

START_TEST(an_unknown_log_fact_fails_the_load)
{
    md_error err;
    json_t *doc = md_recipe_load("signatures.json", &err);
    ck_assert_ptr_nonnull(doc);
    json_object_set_new(json_object_get(doc, "log_facts"), "moon_phase", json_pack("[s]", "moon: ([a-z]+)"));
    md_knowledge kb;
    ck_assert_int_eq(md_knowledge_load_doc(&kb, doc, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "'moon_phase'"));
}
END_TEST

Suite *suite_knowledge(void)
{
    Suite *s = suite_create("knowledge");
    TCase *tc = tcase_create("vocabulary");
    tcase_add_test(tc, embedded_data_loads);
    tcase_add_test(tc, names_the_code_lacks_fail_the_load);
    tcase_add_test(tc, an_unknown_log_fact_fails_the_load);
    suite_add_tcase(s, tc);
    return s;
}
