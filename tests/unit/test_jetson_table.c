#include <string.h>
#include "recipes/jetson_table.h"
#include "recipes/recipes.h"
#include "unit.h"

START_TEST(releases_and_families)
{
    md_error err;
    ck_assert_int_eq(md_jetson_table_load(&err), MD_OK);
    char l4t[16] = "";
    ck_assert(md_jetson_l4t_parse("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic\n", l4t,
                                  sizeof l4t));
    ck_assert_str_eq(l4t, "36.4.3");
    ck_assert(md_jetson_l4t_parse("other line\n# R32 (release), REVISION: 7.4\n", l4t, sizeof l4t));
    ck_assert_str_eq(l4t, "32.7.4");
    ck_assert(!md_jetson_l4t_parse("R36 release 4.3\n", l4t, sizeof l4t));

    const md_jetson_release *r = md_jetson_release_find("32.7.4");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->jetpack, "4.6.4");
    ck_assert_str_eq(r->cuda, "10.2");
    ck_assert_str_eq(r->glibc, "2.27");
    ck_assert_str_eq(md_jetson_release_find("38.2.0")->cuda, "13.0");
    ck_assert_ptr_null(md_jetson_release_find("36.9.9"));
    ck_assert_ptr_null(md_jetson_release_find(""));

    const md_jetson_family *f = md_jetson_family_find(36);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->jetpack, "6");
    ck_assert_str_eq(f->cuda, "12.2-12.6");
    ck_assert_ptr_null(md_jetson_family_find(33));
    md_jetson_table_free();
}
END_TEST

START_TEST(modules_by_model)
{
    md_error err;
    ck_assert_int_eq(md_jetson_table_load(&err), MD_OK);
    const md_jetson_module *m = md_jetson_module_for_model("NVIDIA Jetson Orin Nano Developer Kit");
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->id, "orin-nano");
    ck_assert_uint_eq(m->sm, 87);
    /* rules are tried in order: 'TX2 NX' before 'TX2' */
    ck_assert_str_eq(md_jetson_module_for_model("NVIDIA Jetson TX2 NX Developer Kit")->id, "tx2-nx");
    m = md_jetson_module_for_model("quill");
    ck_assert_str_eq(m->name, "Jetson TX2");
    ck_assert_uint_eq(m->sm, 62);
    ck_assert_uint_eq(m->registers_per_block, 32768);
    ck_assert_uint_eq(md_jetson_module_for_model("NVIDIA Jetson AGX Thor Developer Kit")->sm, 110);
    ck_assert_ptr_null(md_jetson_module_for_model("Raspberry Pi 4 Model B"));
    ck_assert_ptr_null(md_jetson_module_for_model(""));
    m = md_jetson_module_find("xavier-nx");
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->soc, "tegra194");
    ck_assert_uint_eq(m->sms, 6);
    /* the smallest count the table holds: the Nano's one multiprocessor is one, not unknown */
    ck_assert_uint_eq(md_jetson_module_find("nano")->sms, 1);
    ck_assert_ptr_null(md_jetson_module_find("tx3"));
    md_jetson_table_free();
}
END_TEST

START_TEST(unloaded_finds_nothing)
{
    char l4t[16] = "";
    ck_assert(!md_jetson_l4t_parse("# R36 (release), REVISION: 4.3\n", l4t, sizeof l4t));
    ck_assert_ptr_null(md_jetson_release_find("32.7.4"));
    ck_assert_ptr_null(md_jetson_module_for_model("quill"));
}
END_TEST

START_TEST(malformed_entries_are_named)
{
    md_error err;
    ck_assert_int_eq(md_jetson_table_load(&err), MD_OK);
    json_t *doc = md_recipe_load("jetson.json", &err);
    ck_assert_ptr_nonnull(doc);
    json_t *rule = json_array_get(json_object_get(doc, "model_rules"), 0);
    json_object_set_new(rule, "module", json_string("tx9"));
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_ERR_INTERNAL);
    ck_assert_str_eq(err.message, "jetson.json: model rule 'Thor' names no module 'tx9'");
    ck_assert_ptr_null(md_jetson_module_for_model("quill"));

    json_object_set_new(rule, "module", json_string("thor"));
    json_object_set_new(json_array_get(json_object_get(doc, "modules"), 2), "cc", json_string("6"));
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_ERR_INTERNAL);
    ck_assert_str_eq(err.message, "jetson.json: module tx2: 'cc' is not MAJOR.MINOR");

    json_object_set_new(json_array_get(json_object_get(doc, "modules"), 2), "cc", json_string("6.2"));
    json_object_set_new(json_object_get(doc, "release_file"), "pattern", json_string("R([0-9]+)"));
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(err.message, "fewer than 3 groups"));
    json_decref(doc);

    /* counts: 0, past 2^24 or missing are no count (regs_per_block refused, sms unknown) */
    doc = md_recipe_load("jetson.json", &err);
    ck_assert_ptr_nonnull(doc);
    json_t *tx2 = json_array_get(json_object_get(doc, "modules"), 2);
    json_object_set_new(tx2, "regs_per_block", json_integer(0));
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_ERR_INTERNAL);
    ck_assert_str_eq(err.message, "jetson.json: module tx2: bad regs_per_block");
    json_object_set_new(tx2, "regs_per_block", json_integer((1 << 24) + 1));
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_ERR_INTERNAL);
    json_object_set_new(tx2, "regs_per_block", json_integer(1 << 24));
    json_object_del(tx2, "sms");
    ck_assert_int_eq(md_jetson_table_load_json(doc, &err), MD_OK);
    ck_assert_uint_eq(md_jetson_module_find("tx2")->registers_per_block, 1 << 24);
    ck_assert_uint_eq(md_jetson_module_find("tx2")->sms, 0);
    json_decref(doc);
    md_jetson_table_free();
}
END_TEST

Suite *suite_jetson_table(void)
{
    Suite *s = suite_create("jetson_table");
    TCase *tc = tcase_create("lookups");
    tcase_add_test(tc, releases_and_families);
    tcase_add_test(tc, modules_by_model);
    tcase_add_test(tc, unloaded_finds_nothing);
    tcase_add_test(tc, malformed_entries_are_named);
    suite_add_tcase(s, tc);
    return s;
}
