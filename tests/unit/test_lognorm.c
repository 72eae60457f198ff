/* The normal form log lines are matched in (src/lib/diagnose/lognorm.c): characters that vary
 * without meaning, the catalogues' translations, and the line kept as it was. */
#include <stdio.h>
#include <string.h>
#include "diagnose/knowledge_load.h"
#include "diagnose/lognorm.h"
#include "unit.h"

static const char *norm(const md_log_wording *w, const char *line)
{
    static char out[1024];
    md_log_normalise(w, line, strlen(line), out, sizeof out);
    return out;
}

/* Quotes, backslashes, spaces, full-width forms and dashes, without a translation table. */
START_TEST(characters_are_normalised)
{
    md_log_wording w;
    md_error err;
    ck_assert_int_eq(md_log_wording_init(&w, NULL, NULL, 0, &err), MD_OK);
    ck_assert_str_eq(norm(&w, "No module named \xe2\x80\x98MultiScaleDeformableAttention\xe2\x80\x99"),
                     "No module named 'MultiScaleDeformableAttention'");                 /* ‘ ’ */
    ck_assert_str_eq(norm(&w, "\xe2\x80\x9cHalf\xe2\x80\x9d \xc2\xabx\xc2\xbb \xe2\x80\x9ey\xe2\x80\x9c `z' ''w''"),
                     "'Half' 'x' 'y' 'z' 'w'");                                           /* “ ” « » „ “ ` '' */
    ck_assert_str_eq(norm(&w, "identifier \"AT_CHECK\" is undefined"), "identifier \"AT_CHECK\" is undefined");
    ck_assert_str_eq(norm(&w, "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.8\\bin\\nvcc.exe"),
                     "C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v11.8/bin/nvcc.exe");
    ck_assert_str_eq(norm(&w, "'C:\\\\Users\\\\me\\\\lib'"), "'C:/Users/me/lib'");    /* Python's repr */
    ck_assert_str_eq(norm(&w, "nvcc fatal\t  :   Unsupported\xc2\xa0gpu\xe3\x80\x80" "architecture"),
                     "nvcc fatal : Unsupported gpu architecture");
    ck_assert_str_eq(norm(&w, "cuda_runtime.h\xef\xbc\x9aNo such file\xef\xbc\x8c\xef\xbc\x88x\xef\xbc\x89"),
                     "cuda_runtime.h: No such file, (x)");                              /* ： ， （ ） */
    ck_assert_str_eq(norm(&w, "\xe2\x80\x94gencode \xe2\x80\x93" "arch \xe2\x88\x92O2"), "-gencode -arch -O2");
    ck_assert_str_eq(norm(&w, "\xff\xfe random \xe9" " bytes"), "\xff\xfe random \xe9" " bytes"); /* others kept */
    ck_assert_str_eq(norm(&w, ""), "");
    md_log_wording_free(&w);
}
END_TEST

/* A line that needs nothing is not copied: the scan matches the line itself. */
START_TEST(an_unchanged_line_is_not_copied)
{
    md_log_wording w;
    md_error err;
    ck_assert_int_eq(md_log_wording_init(&w, NULL, NULL, 0, &err), MD_OK);
    const char *line = "error: no kernel image is available for execution on the device";
    char out[256];
    size_t n;
    ck_assert_ptr_eq(md_log_normal_form(&w, line, strlen(line), 0, out, sizeof out, &n), line);
    ck_assert_uint_eq(n, strlen(line));
    const char *doubled = "a  b";
    ck_assert_ptr_eq(md_log_normal_form(&w, doubled, 4, 0, out, sizeof out, &n), out);
    ck_assert_str_eq(out, "a b");
    md_log_wording_free(&w);
}
END_TEST

/* The output is cut at its size, never past it. */
START_TEST(output_is_cut_at_its_size)
{
    const char *from[] = { "Fehler: " }, *to[] = { "error: " };
    md_log_wording w;
    md_error err;
    ck_assert_int_eq(md_log_wording_init(&w, from, to, 1, &err), MD_OK);
    char out[6];
    ck_assert_uint_eq(md_log_normalise(&w, "x Fehler: y", 11, out, sizeof out), 5);
    ck_assert_str_eq(out, "x err");
    ck_assert_uint_eq(md_log_normalise(&w, "a  b\\c", 6, out, sizeof out), 5);
    ck_assert_str_eq(out, "a b/c");
    md_log_wording_free(&w);
}
END_TEST

/* The table from recipes/signatures.json: gcc's, binutils', glibc's and make's catalogue texts. */
START_TEST(catalogue_translations_become_english)
{
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load(&kb, &err), MD_OK);
    const md_log_wording *w = &kb.matcher.wording;
    ck_assert_uint_gt(w->n, 50);
    /* gcc de, glibc de */
    ck_assert_str_eq(norm(w, "x.cpp:1:10: schwerwiegender Fehler: cuda_runtime.h: Datei oder Verzeichnis nicht gefunden"),
                     "x.cpp:1:10: fatal error: cuda_runtime.h: No such file or directory");
    /* gcc zh_CN with full-width colons, glibc zh_CN */
    ck_assert_str_eq(norm(w, "x.cpp:1:10: \xe8\x87\xb4\xe5\x91\xbd\xe9\x94\x99\xe8\xaf\xaf\xef\xbc\x9a" "cuda_runtime.h"
                             "\xef\xbc\x9a\xe6\xb2\xa1\xe6\x9c\x89\xe9\x82\xa3\xe4\xb8\xaa\xe6\x96\x87\xe4\xbb\xb6"
                             "\xe6\x88\x96\xe7\x9b\xae\xe5\xbd\x95"),
                     "x.cpp:1:10: fatal error: cuda_runtime.h: No such file or directory");
    /* make zh_CN: "[%s：%s] 错误 %d" */
    ck_assert_str_eq(norm(w, "make: *** [Makefile:114\xef\xbc\x9asrc/a.o] \xe9\x94\x99\xe8\xaf\xaf 127"),
                     "make: *** [Makefile:114: src/a.o] Error 127");
    /* ld fr, with its no-break spaces and guillemets */
    ck_assert_str_eq(norm(w, "a.o\xc2\xa0: r\xc3\xa9" "f\xc3\xa9rence ind\xc3\xa9" "finie vers \xc2\xab\xc2\xa0" "cudaMalloc\xc2\xa0\xc2\xbb"),
                     "a.o : undefined reference to ' cudaMalloc '");
    /* ld ru: cannot find -l */
    ck_assert_str_eq(norm(w, "/usr/bin/ld: \xd0\xbd\xd0\xb5\xd0\xb2\xd0\xbe\xd0\xb7\xd0\xbc\xd0\xbe\xd0\xb6\xd0\xbd\xd0\xbe "
                             "\xd0\xbd\xd0\xb0\xd0\xb9\xd1\x82\xd0\xb8 -lcudnn"),
                     "/usr/bin/ld: cannot find -lcudnn");
    /* the longest text that starts at a byte wins: "error fatal: " is es for "fatal error: " */
    ck_assert_str_eq(norm(w, "a.cu: error fatal: x"), "a.cu: fatal error: x");
    /* never inside a word: "XFehler: " stays */
    ck_assert_str_eq(norm(w, "XFehler: y"), "XFehler: y");
    md_knowledge_free(&kb);
}
END_TEST

/* The scan matches the normal form and keeps the line as written, for the evidence. */
START_TEST(scan_matches_the_normal_form_and_keeps_the_line)
{
    md_knowledge kb;
    md_error err;
    ck_assert_int_eq(md_knowledge_load(&kb, &err), MD_OK);
    const char *log = "In file included from x.cpp:1:\n"
                      "x.cpp:1:10: schwerwiegender Fehler: cuda_runtime.h: Datei oder Verzeichnis nicht gefunden\n"
                      "ImportError: libcudart.so.11.0\xef\xbc\x9a\xe6\x97\xa0\xe6\xb3\x95\xe6\x89\x93\xe5\xbc\x80"
                      "\xe5\x85\xb1\xe4\xba\xab\xe5\xaf\xb9\xe8\xb1\xa1\xe6\x96\x87\xe4\xbb\xb6\n";
    FILE *in = fmemopen((void *)log, strlen(log), "r");
    ck_assert_ptr_nonnull(in);
    md_log_result r;
    ck_assert_int_eq(md_log_scan(in, "log", &kb.matcher, &r, &err), MD_OK);
    fclose(in);
    const md_signature *lib = md_knowledge_find(&kb, "shared-lib-not-found");
    ck_assert_ptr_nonnull(lib);
    const md_log_group_hits *h = &r.groups[lib - kb.sigs];
    ck_assert_uint_eq(h->count, 1);
    ck_assert_uint_eq(h->hits[0].line, 3);
    ck_assert_ptr_nonnull(strstr(h->hits[0].text, "\xe6\x97\xa0\xe6\xb3\x95")); /* as written */
    md_log_result_free(&r);
    md_knowledge_free(&kb);
}
END_TEST

Suite *suite_lognorm(void)
{
    Suite *s = suite_create("lognorm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, characters_are_normalised);
    tcase_add_test(tc, an_unchanged_line_is_not_copied);
    tcase_add_test(tc, output_is_cut_at_its_size);
    tcase_add_test(tc, catalogue_translations_become_english);
    tcase_add_test(tc, scan_matches_the_normal_form_and_keeps_the_line);
    suite_add_tcase(s, tc);
    return s;
}
