/* libFuzzer target: the log reader of diagnose (md_log_scan) with the embedded signatures'
 * patterns, on the bytes as a log file, and the line cleaner on its own. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_common.h"
#include "diagnose/knowledge_load.h"
#include "diagnose/logscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static md_knowledge kb;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    md_error err;
    if (md_knowledge_load(&kb, &err) != MD_OK) {
        fprintf(stderr, "fuzz_logscan: %s\n", err.message);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    FILE *f = size ? fmemopen(copy, size, "r") : NULL;
    if (f) {
        md_error err;
        md_log_result r;
        if (md_log_scan(f, "fuzz.log", &kb.matcher, &r, &err) == MD_OK)
            md_log_result_free(&r);
        fclose(f);
    }
    size_t len = md_log_clean(copy, size);
    if (len > size)
        abort(); /* the cleaner only ever removes bytes */
    free(copy);
    return 0;
}
