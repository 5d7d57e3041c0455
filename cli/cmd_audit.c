/*
 * cmd_audit.c - `vaultgate audit`: prints one audit table (SPEC §2, §6) as an aligned table or,
 * with --json, as the same JSON array the admin API serves; `audit suggest` prints the
 * host_policy fragment of SPEC §12 (audit/allowlist.h) on stdout and one line per host on stderr.
 *
 * Read-only: a missing SQLite file is an error, never created. Exit 0, 1 when the store cannot
 * be read, 2 on bad usage. Values from the store are printed with control bytes replaced, so a
 * row cannot drive the terminal.
 */
#include "audit/allowlist.h"
#include "audit/audit.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpsl.h>

#define AUDIT_DEFAULT_STORE "sqlite:./var/audit.db"
#define AUDIT_CELL_MAX      512

struct audit_args {
    const char *store;
    const char *run;
    enum audit_table table;
    bool have_table;
    bool suggest;
    bool json;
    int min_count;
};

static const char *const blocked_cols[] = {"host",      "source", "seen_count", "first_seen",
                                           "last_seen", "run_id", "user_id",    NULL};
static const char *const route_cols[] = {"host",      "route",  "count", "first_seen",
                                         "last_seen", "run_id", NULL};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vaultgate audit [--store URL] [blocked|routes] [--run ID] [--json]\n"
            "       vaultgate audit [--store URL] suggest [--run ID] [--min-count N]\n"
            "\n"
            "Prints the audit store: blocked_host_log (blocked, the default) or\n"
            "egress_route_log (routes), ordered by host. suggest prints a vault fragment\n"
            "{\"host_policy\": {\"hosts\": {...}}} allowing every host reported or refused,\n"
            "most seen first (three or more names under one registrable domain become\n"
            "*.<domain>), and one line per host on stderr: host, count, route.\n"
            "\n"
            "  --store URL      sqlite:PATH, postgresql://... or off (default " AUDIT_DEFAULT_STORE
            ")\n"
            "  --run ID         only the rows of this run\n"
            "  --json           a JSON array of row objects instead of a table\n"
            "  --min-count N    suggest: only hosts seen at least N times (default 1)\n");
}

/* The one operand: which table, blocked or routes. 0 taken, -1 not. */
static int take_table(void *arg, const char *word)
{
    struct audit_args *a = arg;

    if (a->have_table)
        return -1;
    if (strcmp(word, "suggest") == 0)
        a->suggest = true;
    else if (strcmp(word, "blocked") == 0)
        a->table = AUDIT_TABLE_BLOCKED;
    else if (strcmp(word, "routes") == 0)
        a->table = AUDIT_TABLE_ROUTES;
    else
        return -1;
    a->have_table = true;
    return 0;
}

#define AUDIT_OPT(field) offsetof(struct audit_args, field)

static const struct cli_opt audit_table[] = {
    {"--store", CLI_STR, .flags = CLI_NONEMPTY, .off = AUDIT_OPT(store), .what = "a URL"},
    {"--run", CLI_STR, .flags = CLI_NONEMPTY, .off = AUDIT_OPT(run), .what = "a run id"},
    {"--json", CLI_FLAG, .off = AUDIT_OPT(json)},
    {"--min-count", CLI_INT, .off = AUDIT_OPT(min_count), .lo = 1, .hi = 1e9, .what = "a number"},
    {0},
};

/* An unknown option is an "unexpected argument" too, as it has always been. */
static const struct cli_words audit_words = {
    .unknown = "unexpected argument", .whole = true, .empty_needs = true};

/* The cell text of one column, control bytes replaced by '?'. */
static void cell(const cJSON *row, const char *col, char *out, size_t outsz)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, col);
    size_t n = 0;

    out[0] = '\0';
    if (cJSON_IsNumber(v)) {
        snprintf(out, outsz, "%.0f", v->valuedouble);
        return;
    }
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return;
    for (const char *s = v->valuestring; *s != '\0' && n < outsz - 1; s++)
        out[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    out[n] = '\0';
}

static int is_numeric(const char *col)
{
    return strcmp(col, "seen_count") == 0 || strcmp(col, "count") == 0;
}

static void print_table(const cJSON *rows, const char *const *cols)
{
    char buf[AUDIT_CELL_MAX];
    size_t width[8] = {0};
    const cJSON *row;
    int nrows = cJSON_GetArraySize(rows);

    for (int c = 0; cols[c] != NULL; c++)
        width[c] = strlen(cols[c]);
    cJSON_ArrayForEach(row, rows)
    {
        for (int c = 0; cols[c] != NULL; c++) {
            cell(row, cols[c], buf, sizeof(buf));
            if (strlen(buf) > width[c])
                width[c] = strlen(buf);
        }
    }
    for (int c = 0; cols[c] != NULL; c++)
        printf(is_numeric(cols[c]) ? "%*s%s" : "%-*s%s", (int)width[c], cols[c],
               cols[c + 1] != NULL ? "  " : "\n");
    cJSON_ArrayForEach(row, rows)
    {
        for (int c = 0; cols[c] != NULL; c++) {
            cell(row, cols[c], buf, sizeof(buf));
            /* The last column is not padded: no trailing blanks. */
            printf(is_numeric(cols[c]) ? "%*s%s" : "%-*s%s",
                   cols[c + 1] != NULL ? (int)width[c] : 0, buf, cols[c + 1] != NULL ? "  " : "\n");
        }
    }
    printf("(%d row%s)\n", nrows, nrows == 1 ? "" : "s");
}

/*
 * `audit suggest`: reads host names and counts only (never a vault, never a secret), so it works
 * wherever the store can be read. 0, or EXIT_RUNTIME after one line on stderr.
 */
static int audit_suggest(const struct audit_args *a, const cJSON *seen)
{
    psl_ctx_t *psl = psl_latest(NULL); /* the system's list when newer, else the built-in one */
    cJSON *frag = NULL;
    char *lines = NULL, *text = NULL;
    int rc = EXIT_RUNTIME;

    if (allowlist_suggest(seen, (uint64_t)a->min_count, psl != NULL ? psl : psl_builtin(), &frag,
                          &lines) < 0 ||
        (text = cJSON_Print(frag)) == NULL) {
        fprintf(stderr, "vaultgate audit: out of memory\n");
        goto out;
    }
    fputs(lines, stderr);
    printf("%s\n", text);
    rc = EXIT_OK;
out:
    free(text);
    free(lines);
    cJSON_Delete(frag);
    psl_free(psl);
    return rc;
}

int cmd_audit(int argc, char **argv)
{
    static const struct cli_spec spec = {"audit", audit_table, usage, take_table, &audit_words};
    struct audit_args a = {
        .store = AUDIT_DEFAULT_STORE, .table = AUDIT_TABLE_BLOCKED, .min_count = 1};
    char err[512], shown[512];
    cJSON *rows = NULL;
    int rc;

    if (cli_parse(&spec, argc, argv, &a, &rc) < 0)
        return rc;
    if (strcmp(a.store, "off") != 0 && strncmp(a.store, "sqlite:", 7) != 0 &&
        strncmp(a.store, "postgresql://", 13) != 0 && strncmp(a.store, "postgres://", 11) != 0)
        return cli_usage_error("audit", "--store: expected sqlite:PATH, postgresql://... or off");
    if (a.suggest && a.json)
        return cli_usage_error("audit", "--json: suggest prints JSON already");
    if (!a.suggest && a.min_count != 1)
        return cli_usage_error("audit", "--min-count: only with suggest");
    if (audit_query(a.store, a.suggest ? AUDIT_TABLE_SEEN : a.table, a.run, &rows, err,
                    sizeof(err)) < 0) {
        audit_url_display(a.store, shown, sizeof(shown));
        fprintf(stderr, "vaultgate audit: cannot read %s: %s\n", shown, err);
        return EXIT_RUNTIME;
    }
    if (a.suggest) {
        rc = audit_suggest(&a, rows);
        cJSON_Delete(rows);
        if (rc != EXIT_OK)
            return rc;
    } else if (a.json) {
        char *s = cJSON_Print(rows);

        if (s == NULL) {
            fprintf(stderr, "vaultgate audit: out of memory\n");
            cJSON_Delete(rows);
            return EXIT_RUNTIME;
        }
        printf("%s\n", s);
        free(s);
        cJSON_Delete(rows);
    } else {
        print_table(rows, a.table == AUDIT_TABLE_BLOCKED ? blocked_cols : route_cols);
        cJSON_Delete(rows);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "vaultgate audit: cannot write the output\n");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
