/* What a log says about its machine (recipes/signatures.json's log_facts, read by
 * src/lib/diagnose/diag_logfacts.c) through the library's own flow, and the "ambiguous" note of
 * a message whose two readings tie (diag_fill.c). Each log is read with the probes off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diagnose/diagnose.h"
#include "diagnose/findings.h"
#include "unit.h"

/* A diagnosis of TEXT alone, no probe run; finished when FINISH. Free with done(). */
static md_diagnosis *read_log(const char *text, bool finish)
{
    md_diagnosis *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    md_error err;
    ck_assert_int_eq(md_diagnose_init(d, &err), MD_OK);
    md_diagnose_options opt = { .probe = false };
    md_diagnose_probe(d, &opt);
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(md_diagnose_log(d, in, "t.log", &err), MD_OK);
    fclose(in);
    if (finish)
        ck_assert_int_eq(md_diagnose_finish(d, &err), MD_OK);
    return d;
}

static void done(md_diagnosis *d)
{
    md_diagnose_free(d);
    free(d);
}

/* The log's build targets as "sm_61,compute_75,..." in the order read. */
static const char *builds(const md_log_facts *lf)
{
    static char out[512];
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < lf->n_build; i++)
        at += (size_t)snprintf(out + at, sizeof out - at, "%s%s_%u", i ? "," : "", lf->build_ptx[i] ? "compute" : "sm",
                               lf->build_sms[i]);
    return out;
}

static const char *builds_of(const char *text)
{
    static char out[512];
    md_diagnosis *d = read_log(text, false);
    snprintf(out, sizeof out, "%s", builds(&d->logs[0].facts));
    done(d);
    return out;
}

START_TEST(arch_lists_in_every_notation)
{
    /* TORCH_CUDA_ARCH_LIST: ';' or ' ' between entries, +PTX adding the PTX of its entry */
    ck_assert_str_eq(builds_of("export TORCH_CUDA_ARCH_LIST=\"6.1;7.5+PTX\"\n"), "sm_61,sm_75,compute_75");
    ck_assert_str_eq(builds_of("TORCH_CUDA_ARCH_LIST='8.6 9.0'\n"), "sm_86,sm_90");
    /* CMake's notation: 86 and 86-real SASS, 89-virtual PTX */
    ck_assert_str_eq(builds_of("TORCH_CUDA_ARCH_LIST=\"80;86-real;89-virtual\"\n"), "sm_80,sm_86,compute_89");
    /* nvcc's: code=sm_ / code=compute_, a bracketed list, --generate-code, -arch, --gpu-architecture */
    ck_assert_str_eq(builds_of("nvcc -gencode arch=compute_86,code=[sm_86,compute_86] -c a.cu\n"), "sm_86,compute_86");
    ck_assert_str_eq(builds_of("nvcc --generate-code=arch=compute_70,code=sm_70 -c a.cu\n"), "sm_70");
    ck_assert_str_eq(builds_of("nvcc -arch=sm_75 -c a.cu\n"), "sm_75");
    ck_assert_str_eq(builds_of("nvcc --gpu-architecture=sm_87 -c a.cu\n"), "sm_87");
    ck_assert_str_eq(builds_of("nvcc -gencode=arch=compute_90a,code=sm_90a -c a.cu\n"), "sm_90");
    /* no list: nothing made up */
    ck_assert_str_eq(builds_of("TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included\n"), "");
}
END_TEST

/* On a command line the list ends where its value does: the next words (a command, a version)
 * are not entries. */
START_TEST(arch_list_stops_at_its_end_on_a_command_line)
{
    md_diagnosis *d = read_log("TORCH_CUDA_ARCH_LIST=8.6 nvcc 11.8 python setup.py install\n", false);
    ck_assert_str_eq(d->logs[0].facts.arch_list, "8.6");
    ck_assert_str_eq(builds(&d->logs[0].facts), "sm_86");
    done(d);
    d = read_log("TORCH_CUDA_ARCH_LIST=\"7.5 8.0\" python setup.py 9.0 build\n", false);
    ck_assert_str_eq(d->logs[0].facts.arch_list, "7.5 8.0");
    ck_assert_str_eq(builds(&d->logs[0].facts), "sm_75,sm_80");
    done(d);
}
END_TEST

static md_log_facts facts_of(const char *text)
{
    md_diagnosis *d = read_log(text, false);
    md_log_facts lf = d->logs[0].facts;
    done(d);
    return lf;
}

START_TEST(versions_in_each_notation)
{
    ck_assert_str_eq(facts_of("pip install torch==2.1.0+cu118\n").torch_version, "2.1.0+cu118");
    ck_assert_str_eq(facts_of("pytorch == 1.13.1\n").torch_version, "1.13.1");
    ck_assert_str_eq(facts_of("torch                    2.0.1\n").torch_version, "2.0.1");  /* pip list */
    ck_assert_str_eq(facts_of("versions (torch: 2.2.0, cuda 12.1)\n").torch_version, "2.2.0");
    ck_assert_str_eq(facts_of("PyTorch version: 1.10.1+cu113\n").torch_version, "1.10.1+cu113");
    /* another package's version is not torch's */
    ck_assert_str_eq(facts_of("torchvision==0.15.2\nmytorch==1.0.0\n").torch_version, "");
    /* torch's CUDA from its wheel's local version */
    ck_assert_str_eq(facts_of("torch==2.1.0+cu121\n").torch_cuda, "12.1");
    /* only "+cu" and digits: a local version with anything else there names no CUDA (PEP 440
     * writes a build's "+cu_118" as "+cu.118") */
    ck_assert_str_eq(facts_of("torch==2.1.0+cu.118\n").torch_version, "2.1.0+cu.118");
    ck_assert_str_eq(facts_of("torch==2.1.0+cu.118\n").torch_cuda, "");
    ck_assert_str_eq(facts_of("torch.version.cuda: 11.8\n").torch_cuda, "11.8");
    /* nvcc's and gcc's as their own tools print them */
    ck_assert_str_eq(facts_of("Cuda compilation tools, release 12.1, V12.1.105\n").nvcc_version, "12.1");
    ck_assert_str_eq(facts_of("found CUDA compiler: /usr/local/cuda/bin/nvcc version 9.1.85\n").nvcc_version, "9.1");
    ck_assert_str_eq(facts_of("gcc version 8.0.1 20180324 (Red Hat 8.0.1-0.20) (GCC)\n").gcc_version, "8.0.1");
    ck_assert_str_eq(facts_of("found gcc version: 11.4.0\n").gcc_version, "11.4.0");
    ck_assert_str_eq(facts_of("GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n").gcc_version, "11.4.0");
}
END_TEST

START_TEST(compute_capability_as_a_number_and_as_torch_tuple)
{
    ck_assert_uint_eq(facts_of("torch.cuda.get_device_capability(0): (8, 6)\n").sm, 86);
    ck_assert_uint_eq(facts_of("Device capability: (7,5)\n").sm, 75);
    ck_assert_uint_eq(facts_of("Capability: (12, 0)\n").sm, 120);
    ck_assert_uint_eq(facts_of("  CUDA Capability Major/Minor version number:    6.2\n").sm, 62);
    ck_assert_uint_eq(facts_of("NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible\n").sm, 86);
    ck_assert_uint_eq(facts_of("nothing here\n").sm, 0);
}
END_TEST

/* "invalid device function" has two readings (no-kernel-image, cuda-version-mismatch). With
 * nothing for either they tie: the finding keeps the data's first and says it is ambiguous.
 * With torch's CUDA 12.1 against nvcc 11.8 the second wins by one: no such note. */
static const char ambiguous_log[] =
    "UserWarning: TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation.\n"
    "  CUDA Capability Major/Minor version number:    8.0\n"
    "/usr/local/cuda-11.8/bin/nvcc -c ms_deform_attn_cuda.cu -o ms_deform_attn_cuda.o "
    "-gencode=arch=compute_80,code=sm_80\n"
    "%s"
    "RuntimeError: CUDA error: invalid device function\n";

static bool has_note(const md_finding *f, const char *start)
{
    for (size_t i = 0; i < f->n_notes; i++)
        if (strncmp(f->notes[i], start, strlen(start)) == 0)
            return true;
    return false;
}

START_TEST(a_tie_between_two_findings_is_called_ambiguous)
{
    char text[1024];
    snprintf(text, sizeof text, ambiguous_log, "");
    md_diagnosis *d = read_log(text, true);
    ck_assert_uint_eq(d->n_findings, 1);
    const md_finding *f = &d->findings[0];
    ck_assert_str_eq(f->sig->id, "no-kernel-image");
    ck_assert_ptr_nonnull(f->tied_with);
    ck_assert_str_eq(f->tied_with->id, "cuda-version-mismatch");
    ck_assert(has_note(f, "Ambiguous: nothing in the log decides between no-kernel-image and cuda-version-mismatch, "
                          "which score the same; the fixes are no-kernel-image's"));
    done(d);
}
END_TEST

START_TEST(a_reading_that_wins_is_not_ambiguous)
{
    char text[1024];
    snprintf(text, sizeof text, ambiguous_log, "CUDA used to build PyTorch: 12.1\n");
    md_diagnosis *d = read_log(text, true);
    ck_assert_uint_eq(d->n_findings, 1);
    const md_finding *f = &d->findings[0];
    ck_assert_str_eq(f->sig->id, "cuda-version-mismatch");
    ck_assert_ptr_null(f->tied_with);
    ck_assert(!has_note(f, "Ambiguous"));
    done(d);
}
END_TEST

Suite *suite_logfacts(void)
{
    Suite *s = suite_create("logfacts");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, arch_lists_in_every_notation);
    tcase_add_test(tc, arch_list_stops_at_its_end_on_a_command_line);
    tcase_add_test(tc, versions_in_each_notation);
    tcase_add_test(tc, compute_capability_as_a_number_and_as_torch_tuple);
    tcase_add_test(tc, a_tie_between_two_findings_is_called_ambiguous);
    tcase_add_test(tc, a_reading_that_wins_is_not_ambiguous);
    suite_add_tcase(s, tc);
    return s;
}
