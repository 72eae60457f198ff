/* msda-doctor verify: a built wheel checked on this machine's CPU and GPUs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include "cli.h"
#include "verify/verify.h"

static json_t *device_json(const md_verify_device *dev)
{
    json_t *dtypes = json_array();
    for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
        const md_verify_dtype *r = &dev->dtypes[d];
        if (!r->dtype)
            continue;
        json_array_append_new(dtypes, json_pack("{s:s, s:b, s:b, s:o, s:o, s:o, s:f, s:o}", "dtype", r->dtype, "ran", r->ran,
                                                "passed", r->passed,
                                                "forward_error", r->ran && isfinite(r->forward_error) ? json_real(r->forward_error) : json_null(),
                                                "backward_error", r->ran && isfinite(r->backward_error) ? json_real(r->backward_error) : json_null(),
                                                "deterministic_backward_error",
                                                r->deterministic_ran && isfinite(r->deterministic_error)
                                                    ? json_real(r->deterministic_error) : json_null(),
                                                "tolerance", r->tolerance,
                                                "error", r->error[0] ? json_string(r->error) : json_null()));
    }
    return json_pack("{s:s, s:b, s:o, s:s, s:b, s:o, s:o}", "device", dev->device, "gpu", dev->is_gpu, "sm",
                     dev->is_gpu ? json_integer(dev->sm) : json_null(), "code", dev->code, "passed", dev->passed,
                     "error", dev->error[0] ? json_string(dev->error) : json_null(), "dtypes", dtypes);
}

static void print_device(const md_verify_device *dev)
{
    printf("[%s] %s: %s\n", dev->passed ? "ok" : "FAIL", dev->device, dev->error[0] ? dev->error : dev->code);
    for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
        const md_verify_dtype *r = &dev->dtypes[d];
        if (!r->dtype)
            continue;
        if (!r->ran) {
            printf("    %-4s  did not run: %s\n", r->dtype, r->error);
            continue;
        }
        printf("    %-4s  forward %.2e  backward %.2e", r->dtype, r->forward_error, r->backward_error);
        if (r->deterministic_ran)
            printf("  deterministic backward %.2e", r->deterministic_error);
        printf("  (tolerance %.0e)%s%s%s\n", r->tolerance, r->passed ? "" : "  FAIL", r->error[0] ? ": " : "", r->error);
    }
}

static const md_option md_cli_verify_options[] = {
    { 0, "WHEEL", NULL, MD_OPT_POSITIONAL, "a wheel written by 'msda-doctor build'" },
    { 'j', "json", NULL, 0, "print JSON instead of text" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

static int cmd_verify(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "verify", md_cli_verify_options))
        return MD_EXIT_INTERNAL;
    bool json = false;
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_verify); return MD_EXIT_OK;
        default: return md_cli_option_error("verify", argv, c);
        }
    }
    if (argc - optind != 1)
        return md_cli_usage_error("verify", argc - optind ? "give one wheel" : "no wheel given");
    md_verify_report rep;
    md_error err;
    md_status st = md_verify_wheel(argv[optind], &rep, &err);
    if (st != MD_OK) {
        md_cli_report(&err);
        md_verify_report_free(&rep);
        return st == MD_ERR_UNSUPPORTED ? MD_EXIT_PROBLEMS : md_cli_exit_for(st);
    }
    int rc = rep.passed ? MD_EXIT_OK : MD_EXIT_PROBLEMS;
    if (json) {
        json_t *devices = json_array();
        for (size_t i = 0; i < rep.n_devices; i++)
            json_array_append_new(devices, device_json(&rep.devices[i]));
        int jrc = md_cli_print_json(json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:o, s:b}", "wheel", rep.wheel,
                                              "library_version", rep.library_version, "embedded", rep.embedded,
                                              "record_ok", rep.record_ok, "record_error",
                                              rep.record_ok ? json_null() : json_string(rep.record_error),
                                              "devices", devices, "gpu_note",
                                              rep.gpu_note[0] ? json_string(rep.gpu_note) : json_null(), "passed",
                                              rep.passed));
        if (jrc != MD_EXIT_OK)
            rc = jrc;
    } else {
        printf("%s: libmsda %s, code %s\n", rep.wheel, rep.library_version, rep.embedded);
        printf("[%s] RECORD%s%s\n", rep.record_ok ? "ok" : "FAIL", rep.record_ok ? ": every file's sha256 and size match" : ": ",
               rep.record_ok ? "" : rep.record_error);
        for (size_t i = 0; i < rep.n_devices; i++)
            print_device(&rep.devices[i]);
        if (rep.gpu_note[0])
            printf("[--] GPUs not checked: %s\n", rep.gpu_note);
        printf("%s\n", rep.passed ? "verify: passed" : "verify: FAILED");
    }
    md_verify_report_free(&rep);
    return rc;
}

const md_command md_cmd_verify = { "verify", cmd_verify,
    "Check a built wheel here: its RECORD, and its kernels on the CPU and every GPU",
    "verify [--json] WHEEL",
    md_cli_verify_options };
