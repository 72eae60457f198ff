/* Option tables: getopt_long's arrays, the --help list and the JSON all made from one table. */
#include <string.h>
#include "cli.h"

/* Lines of --help fit an 80-column terminal; the descriptions start in one column. */
enum { HELP_WIDTH = 79, HELP_INDENT = 2, HELP_COLUMN = 19 };

static bool is_option(const md_option *o)
{
    return !(o->flags & MD_OPT_POSITIONAL);
}

bool md_getopt_init(md_getopt *g, const char *command, const md_option *table)
{
    size_t n = 0, s = 0;
    /* ':' first: a missing value comes back as ':', told apart from an unknown option. */
    g->shortopts[s++] = ':';
    for (const md_option *o = table; o->name; o++) {
        if (!is_option(o))
            continue;
        bool clash = n == MD_MAX_OPTIONS || o->key <= 0 || o->key == ':' || o->key == '?';
        for (size_t i = 0; i < n && !clash; i++)
            clash = g->longopts[i].val == o->key;
        if (clash) {
            md_cli_error("internal error: the option table of '%s' is broken at '--%s'", command, o->name);
            return false;
        }
        g->longopts[n++] = (struct option){ o->name, o->value ? required_argument : no_argument, NULL, o->key };
        if (o->flags & MD_OPT_SHORT) {
            g->shortopts[s++] = (char)o->key;
            if (o->value)
                g->shortopts[s++] = ':';
        }
    }
    g->longopts[n] = (struct option){ NULL, 0, NULL, 0 };
    g->shortopts[s] = '\0';
    return true;
}

int md_getopt_next(md_getopt *g, int argc, char **argv)
{
    return getopt_long(argc, argv, g->shortopts, g->longopts, NULL);
}

const md_option *md_option_find(const md_option *table, const char *arg)
{
    for (const md_option *o = table; o->name; o++) {
        if (!is_option(o))
            continue;
        if (strncmp(arg, "--", 2) == 0 && strcmp(arg + 2, o->name) == 0)
            return o;
        if ((o->flags & MD_OPT_SHORT) && arg[0] == '-' && arg[1] == o->key && arg[2] == '\0')
            return o;
    }
    return NULL;
}

/* "-j, --jobs N", "--gpu ARCH" or "FILE|DIR": the left column of --help, also the man page's tag. */
static void option_label(const md_option *o, char *buf, size_t size)
{
    if (!is_option(o)) {
        snprintf(buf, size, "%s", o->name);
        return;
    }
    char short_part[8] = "";
    if (o->flags & MD_OPT_SHORT)
        snprintf(short_part, sizeof short_part, "-%c, ", o->key);
    snprintf(buf, size, "%s--%s%s%s", short_part, o->name, o->value ? " " : "", o->value ? o->value : "");
}

/* Writes TEXT from column COL on, breaking lines between words before HELP_WIDTH. */
static void print_wrapped(FILE *out, const char *text, int col)
{
    const char *p = text;
    bool line_empty = true;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (!line_empty && col + 1 + (int)word > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_COLUMN, "");
            col = HELP_COLUMN;
            line_empty = true;
        }
        fprintf(out, "%s%.*s", line_empty ? "" : " ", (int)word, p);
        col += (int)word + (line_empty ? 0 : 1);
        line_empty = false;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', out);
}

void md_options_print(FILE *out, const md_option *table)
{
    for (const md_option *o = table; o->name; o++) {
        /* A help text is one sentence: a few hundred bytes at most. */
        char label[128], help[1024];
        option_label(o, label, sizeof label);
        bool repeat_note = is_option(o) && (o->flags & MD_OPT_REPEATABLE);
        snprintf(help, sizeof help, "%s%s", o->help, repeat_note ? "; repeatable" : "");
        int col = fprintf(out, "%*s%s", HELP_INDENT, "", label);
        if (col >= HELP_COLUMN) {
            fputc('\n', out);
            col = 0;
        }
        fprintf(out, "%*s", HELP_COLUMN - col, "");
        print_wrapped(out, help, HELP_COLUMN);
    }
}

json_t *md_options_json(const md_option *table, bool positional)
{
    json_t *list = json_array();
    for (const md_option *o = table; list && o->name; o++) {
        if (is_option(o) == positional)
            continue;
        json_t *row;
        bool repeatable = o->flags & MD_OPT_REPEATABLE;
        if (positional) {
            row = json_pack("{s:s, s:b, s:s}", "name", o->name, "repeatable", repeatable, "help", o->help);
        } else {
            char name[128], short_name[4];
            snprintf(name, sizeof name, "--%s", o->name);
            snprintf(short_name, sizeof short_name, "-%c", o->key);
            row = json_pack("{s:s, s:o, s:o, s:b, s:b, s:s}", "name", name, "short",
                            (o->flags & MD_OPT_SHORT) ? json_string(short_name) : json_null(), "value",
                            o->value ? json_string(o->value) : json_null(), "repeatable", repeatable, "required",
                            (o->flags & MD_OPT_REQUIRED) != 0, "help", o->help);
        }
        if (!row || json_array_append_new(list, row) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}
