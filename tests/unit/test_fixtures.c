/* The readers on binaries that nvcc built at test time (tests/fixtures/make-fixtures): the
 * architectures are exactly the -gencode sets asked for, and each kernel's registers and static
 * shared memory are exactly what ptxas -v reported. Corrupted copies fail cleanly. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <gelf.h>
#include "binary/devcode.h"
#include "binary/elf_check.h"
#include "binary/inspect.h"
#include "unit.h"

static const char *fixture_dir(void)
{
    const char *d = getenv("MSDA_FIXTURES");
    ck_assert_msg(d != NULL, "MSDA_FIXTURES is not set (run through make check)");
    return d;
}

static bool fixture_exists(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), name);
    return access(path, R_OK) == 0;
}

/* CUDA 11.8 fixtures are required unless explicitly waived (install-deps installs 11.8). */
static bool need_cuda118(void)
{
    if (fixture_exists("f118-multi.so"))
        return true;
    ck_assert_msg(getenv("MSDA_ALLOW_NO_CUDA118") != NULL,
                  "CUDA 11.8 fixtures missing: run scripts/install-deps --test");
    return false;
}

static md_inspected inspect_one(const char *file, md_inspection *ins)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), file);
    md_error err;
    memset(ins, 0, sizeof *ins);
    ck_assert_int_eq(md_inspect_path(path, ins, &err), MD_OK);
    ck_assert_uint_eq(ins->count, 1);
    ck_assert_msg(ins->items[0].status == MD_OK, "%s: %s", file, ins->items[0].message);
    return ins->items[0];
}

static void join_archs(const md_binary *bin, md_code_kind kind, char *out, size_t size)
{
    char names[64][24];
    size_t n = md_binary_archs(bin, kind, names, 64);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strncat(out, " ", size - strlen(out) - 1);
        strncat(out, names[i], size - strlen(out) - 1);
    }
}

/* NAME.archs holds "sass: sm_75 sm_80" and "ptx: compute_90". */
static void check_archs(const char *name, const md_binary *bin)
{
    char path[4096], line[512], got[512];
    snprintf(path, sizeof path, "%s/%s.archs", fixture_dir(), name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no %s", path);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        bool sass = strncmp(line, "sass:", 5) == 0;
        join_archs(bin, sass ? MD_CODE_SASS : MD_CODE_PTX, got, sizeof got);
        ck_assert_msg(strcmp(got, strchr(line, ':') + 1) == 0, "%s %s: expected '%s', read '%s'", name,
                      sass ? "SASS" : "PTX", strchr(line, ':') + 1, got);
    }
    fclose(f);
}

static const md_kernel *find_kernel(const md_binary *bin, unsigned sm, char variant, const char *plain)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "_Z%zu%s", strlen(plain), plain);
    const md_kernel *found = NULL;
    for (size_t i = 0; i < bin->n_entries; i++) {
        const md_code_entry *e = &bin->entries[i];
        if (e->kind != MD_CODE_SASS || e->sm != sm || e->variant != variant)
            continue;
        for (size_t k = 0; k < e->n_kernels; k++)
            if (strncmp(e->kernels[k].name, prefix, strlen(prefix)) == 0)
                found = &e->kernels[k];
    }
    return found;
}

/* NAME.ptxas holds "sm_75 probe_shared 9 1200" lines from nvcc -Xptxas -v. */
static void check_kernels(const char *name, const md_binary *bin)
{
    char path[4096], arch[32], kernel[128];
    unsigned regs, smem, checked = 0;
    snprintf(path, sizeof path, "%s/%s.ptxas", fixture_dir(), name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no %s", path);
    while (fscanf(f, "%31s %127s %u %u", arch, kernel, &regs, &smem) == 4) {
        unsigned sm = (unsigned)strtoul(arch + 3, NULL, 10);
        char variant = arch[strlen(arch) - 1] == 'a' ? 'a' : 0;
        const md_kernel *k = find_kernel(bin, sm, variant, kernel);
        ck_assert_msg(k != NULL, "%s: kernel %s not found for %s", name, kernel, arch);
        ck_assert_msg(k->registers == regs, "%s %s %s: %u registers read, ptxas said %u", name, arch, kernel,
                      k->registers, regs);
        ck_assert_msg(k->shared_bytes == smem, "%s %s %s: %llu shared bytes read, ptxas said %u", name, arch,
                      kernel, (unsigned long long)k->shared_bytes, smem);
        unsigned bounds = strcmp(kernel, "probe_shared") == 0 ? 256 : strcmp(kernel, "probe_bounds1024") == 0 ? 1024 : 0;
        ck_assert_msg(k->max_threads == bounds, "%s %s %s: launch bounds %u, expected %u", name, arch, kernel,
                      k->max_threads, bounds);
        checked++;
    }
    fclose(f);
    ck_assert_msg(checked > 0, "%s: ptxas reported no kernel", name);
}

static void check_fixture(const char *name, const char *ext, bool kernels)
{
    char file[256];
    snprintf(file, sizeof file, "%s.%s", name, ext);
    md_inspection ins;
    md_inspected it = inspect_one(file, &ins);
    check_archs(name, &it.bin);
    if (kernels)
        check_kernels(name, &it.bin);
    md_inspection_free(&ins);
}

START_TEST(cuda13_fixtures)
{
    check_fixture("f13-multi", "so", true);
    check_fixture("f13-sm80", "so", true);
    check_fixture("f13-ptx-only", "so", false);
    check_fixture("f13-compressed", "fatbin", true);
    check_fixture("f13-uncompressed", "fatbin", true);
    check_fixture("f13-sm90", "cubin", true);
    check_fixture("f13-sm90a", "cubin", true);
    check_fixture("f13-regs40", "cubin", true);
}
END_TEST

START_TEST(cuda118_fixtures)
{
    if (!need_cuda118())
        return;
    check_fixture("f118-multi", "so", true);
    check_fixture("f118-sm52", "so", true);
    check_fixture("f118-sm61-ptx", "so", true);
    check_fixture("f118-compressed", "fatbin", true);
    check_fixture("f118-regs40", "fatbin", true);
}
END_TEST

START_TEST(compression_flags_are_reported)
{
    md_inspection ins;
    md_inspected it = inspect_one("f13-compressed.fatbin", &ins);
    for (size_t i = 0; i < it.bin.n_entries; i++) {
        ck_assert_int_eq(it.bin.entries[i].compression, MD_COMPRESS_ZSTD);
        ck_assert(it.bin.entries[i].uncompressed_size > 0);
    }
    md_inspection_free(&ins);
    it = inspect_one("f13-uncompressed.fatbin", &ins);
    for (size_t i = 0; i < it.bin.n_entries; i++)
        ck_assert_int_eq(it.bin.entries[i].compression, MD_COMPRESS_NONE);
    md_inspection_free(&ins);
    if (need_cuda118()) {
        it = inspect_one("f118-compressed.fatbin", &ins);
        for (size_t i = 0; i < it.bin.n_entries; i++) {
            ck_assert_int_eq(it.bin.entries[i].compression, MD_COMPRESS_LZ4);
            if (it.bin.entries[i].kind == MD_CODE_SASS)
                ck_assert_msg(it.bin.entries[i].kernels_read, "LZ4 SASS not opened");
        }
        md_inspection_free(&ins);
    }
}
END_TEST

START_TEST(arch_specific_cubin_is_marked)
{
    md_inspection ins;
    md_inspected it = inspect_one("f13-sm90a.cubin", &ins);
    ck_assert_int_eq(it.bin.entries[0].variant, 'a');
    md_inspection_free(&ins);
    it = inspect_one("f13-sm90.cubin", &ins);
    ck_assert_int_eq(it.bin.entries[0].variant, 0);
    md_inspection_free(&ins);
}
END_TEST

/* Copies of real fixtures, truncated and with bytes flipped: read through a memfd so that the
 * file path is exercised too. Only OK or a clean input error may come back. */
static void mutate_and_read(const char *file, unsigned rounds, unsigned seed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), file);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    off_t size = lseek(fd, 0, SEEK_END);
    uint8_t *orig = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    ck_assert(orig != MAP_FAILED);
    close(fd);
    uint8_t *copy = malloc((size_t)size);
    srand(seed);
    for (unsigned r = 0; r < rounds; r++) {
        memcpy(copy, orig, (size_t)size);
        size_t n = (size_t)size;
        if (r % 3 == 0)
            n = (size_t)rand() % (size_t)size + 1;
        for (int flips = 1 + rand() % 8; flips > 0; flips--)
            copy[(size_t)rand() % n] ^= (uint8_t)(1 + rand() % 255);
        int mfd = memfd_create("mutant", 0);
        ck_assert_int_ge(mfd, 0);
        ck_assert_int_eq(write(mfd, copy, n), (ssize_t)n);
        char mpath[64];
        snprintf(mpath, sizeof mpath, "/proc/self/fd/%d", mfd);
        md_inspection ins = { 0 };
        md_error err;
        ck_assert_int_eq(md_inspect_path(mpath, &ins, &err), MD_OK);
        for (size_t i = 0; i < ins.count; i++) {
            md_status st = ins.items[i].status;
            ck_assert_msg(st == MD_OK || st == MD_ERR_FORMAT || st == MD_ERR_UNKNOWN_TYPE,
                          "%s round %u: status %d (%s)", file, r, st, ins.items[i].message);
        }
        md_inspection_free(&ins);
        close(mfd);
    }
    free(copy);
    munmap(orig, (size_t)size);
}

/* Each kernel of a cubin must be in its symbol table, the first as much as the last: with one
 * kernel's symbol renamed (its name in .strtab, where a NUL precedes it; the section names
 * have a prefix), the read fails naming that kernel. */
START_TEST(a_kernel_missing_from_the_symbol_table_is_named)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/f13-regs40.cubin", fixture_dir());
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static uint8_t orig[1 << 20], copy[1 << 20];
    size_t size = fread(orig, 1, sizeof orig, f);
    fclose(f);
    ck_assert_uint_gt(size, 0);
    md_binary bin = { 0 };
    md_error err;
    md_code_entry *e = md_binary_add_entry(&bin);
    memcpy(copy, orig, size);
    ck_assert_int_eq(md_cubin_read(copy, size, e, &err), MD_OK);
    ck_assert_uint_ge(e->n_kernels, 2);
    size_t picks[2] = { 0, e->n_kernels - 1 };
    char names[2][256];
    for (int p = 0; p < 2; p++)
        snprintf(names[p], sizeof names[p], "%s", e->kernels[picks[p]].name);
    md_binary_free(&bin);
    for (int p = 0; p < 2; p++) {
        memcpy(copy, orig, size);
        size_t len = strlen(names[p]), renamed = 0;
        for (size_t at = 1; at + len < size; at++)
            if (copy[at - 1] == 0 && copy[at + len] == 0 && memcmp(copy + at, names[p], len) == 0) {
                copy[at] = 'X';
                renamed++;
            }
        ck_assert_uint_eq(renamed, 1);
        memset(&bin, 0, sizeof bin);
        e = md_binary_add_entry(&bin);
        ck_assert_int_eq(md_cubin_read(copy, size, e, &err), MD_ERR_FORMAT);
        ck_assert_msg(strstr(err.message, names[p]) && strstr(err.message, "is not in its symbol table"),
                      "message: %s", err.message);
        md_binary_free(&bin);
    }
}
END_TEST

/* An ELF file without a section header table (e_shoff 0) is fine when it also announces no
 * sections, and corrupt when it announces some. */
START_TEST(no_section_table_is_checked_against_its_count)
{
    uint8_t image[sizeof(Elf64_Ehdr)];
    for (int announced = 0; announced < 2; announced++) {
        memset(image, 0, sizeof image);
        Elf64_Ehdr *h = (Elf64_Ehdr *)(void *)image;
        memcpy(h->e_ident, ELFMAG, SELFMAG);
        h->e_ident[EI_CLASS] = ELFCLASS64;
        h->e_ident[EI_DATA] = ELFDATA2LSB;
        h->e_ident[EI_VERSION] = EV_CURRENT;
        h->e_type = ET_DYN;
        h->e_machine = EM_X86_64;
        h->e_version = EV_CURRENT;
        h->e_ehsize = sizeof(Elf64_Ehdr);
        h->e_shentsize = sizeof(Elf64_Shdr);
        h->e_shnum = announced ? 3 : 0;
        elf_version(EV_CURRENT);
        Elf *elf = elf_memory((char *)image, sizeof image);
        ck_assert_ptr_nonnull(elf);
        md_error err;
        size_t shnum = 99;
        md_status st = md_elf_check(elf, sizeof image, "ELF file", &shnum, NULL, &err);
        elf_end(elf);
        if (announced) {
            ck_assert_int_eq(st, MD_ERR_FORMAT);
            ck_assert_str_eq(err.message, "corrupt ELF file: 3 section headers at offset 0");
        } else {
            ck_assert_msg(st == MD_OK, "%s", err.message);
            ck_assert_uint_eq(shnum, 0);
        }
    }
}
END_TEST

START_TEST(mutated_fixtures_fail_cleanly)
{
    mutate_and_read("f13-compressed.fatbin", 400, 1);
    mutate_and_read("f13-uncompressed.fatbin", 400, 2);
    mutate_and_read("f13-sm90.cubin", 400, 3);
    mutate_and_read("f13-sm80.so", 150, 4);
    if (need_cuda118())
        mutate_and_read("f118-compressed.fatbin", 400, 5);
}
END_TEST

Suite *suite_fixtures(void)
{
    Suite *s = suite_create("fixtures");
    TCase *tc = tcase_create("nvcc-built");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda13_fixtures);
    tcase_add_test(tc, cuda118_fixtures);
    tcase_add_test(tc, compression_flags_are_reported);
    tcase_add_test(tc, arch_specific_cubin_is_marked);
    tcase_add_test(tc, a_kernel_missing_from_the_symbol_table_is_named);
    tcase_add_test(tc, no_section_table_is_checked_against_its_count);
    tcase_add_test(tc, mutated_fixtures_fail_cleanly);
    suite_add_tcase(s, tc);
    return s;
}
