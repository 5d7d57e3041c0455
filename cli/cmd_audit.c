/*
 * cmd_audit.c - `vaultgate audit`: prints one audit table (SPEC §2, §6) as an aligned table or,
 * with --json, as the same JSON array the admin API serves.
 *
 * Read-only: a missing SQLite file is an error, never created. Exit 0, 1 when the store cannot
 * be read, 2 on bad usage. Values from the store are printed with control bytes replaced, so a
 * row cannot drive the terminal.
 */
#include "audit/audit.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_DEFAULT_STORE "sqlite:./var/audit.db"
#define AUDIT_CELL_MAX      512

struct audit_args {
    const char *store;
    const char *run;
    enum audit_table table;
    int json;
};

static const char *const blocked_cols[] = {"host",      "source", "seen_count", "first_seen",
                                           "last_seen", "run_id", "user_id",    NULL};
static const char *const route_cols[] = {"host",      "route",  "count", "first_seen",
                                         "last_seen", "run_id", NULL};

static int usage(FILE *out)
{
    fprintf(out, "usage: vaultgate audit [--store URL] [blocked|routes] [--run ID] [--json]\n"
                 "\n"
                 "Prints the audit store: blocked_host_log (blocked, the default) or\n"
                 "egress_route_log (routes), ordered by host.\n"
                 "\n"
                 "  --store URL  sqlite:PATH, postgresql://... or off (default " AUDIT_DEFAULT_STORE
                 ")\n"
                 "  --run ID     only the rows of this run\n"
                 "  --json       a JSON array of row objects instead of a table\n");
    return EXIT_OK;
}

/* "--opt VALUE" or "--opt=VALUE"; 1 when argv[*i] is opt (value in *val), 0 when not, -1 bad. */
static int opt_value(int argc, char **argv, int *i, const char *opt, const char **val)
{
    size_t n = strlen(opt);

    if (strncmp(argv[*i], opt, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

static int parse_args(int argc, char **argv, struct audit_args *a, int *help)
{
    int have_table = 0;

    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;

        if (cli_is_help(argv[i])) {
            *help = 1;
            return 0;
        }
        if ((r = opt_value(argc, argv, &i, "--store", &v)) != 0) {
            if (r < 0 || v[0] == '\0')
                return cli_usage_error("audit", "--store needs a URL");
            a->store = v;
        } else if ((r = opt_value(argc, argv, &i, "--run", &v)) != 0) {
            if (r < 0 || v[0] == '\0')
                return cli_usage_error("audit", "--run needs a run id");
            a->run = v;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (!have_table && strcmp(argv[i], "blocked") == 0) {
            a->table = AUDIT_TABLE_BLOCKED;
            have_table = 1;
        } else if (!have_table && strcmp(argv[i], "routes") == 0) {
            a->table = AUDIT_TABLE_ROUTES;
            have_table = 1;
        } else {
            return cli_usage_error("audit", "unexpected argument '%.64s'", argv[i]);
        }
    }
    return 0;
}

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

int cmd_audit(int argc, char **argv)
{
    struct audit_args a = {AUDIT_DEFAULT_STORE, NULL, AUDIT_TABLE_BLOCKED, 0};
    char err[512], shown[512];
    cJSON *rows = NULL;
    int help = 0, rc;

    rc = parse_args(argc, argv, &a, &help);
    if (rc != 0)
        return rc;
    if (help)
        return usage(stdout);
    if (strcmp(a.store, "off") != 0 && strncmp(a.store, "sqlite:", 7) != 0 &&
        strncmp(a.store, "postgresql://", 13) != 0 && strncmp(a.store, "postgres://", 11) != 0)
        return cli_usage_error("audit", "--store: expected sqlite:PATH, postgresql://... or off");
    if (audit_query(a.store, a.table, a.run, &rows, err, sizeof(err)) < 0) {
        audit_url_display(a.store, shown, sizeof(shown));
        fprintf(stderr, "vaultgate audit: cannot read %s: %s\n", shown, err);
        return EXIT_RUNTIME;
    }
    if (a.json) {
        char *s = cJSON_Print(rows);

        if (s == NULL) {
            fprintf(stderr, "vaultgate audit: out of memory\n");
            cJSON_Delete(rows);
            return EXIT_RUNTIME;
        }
        printf("%s\n", s);
        free(s);
    } else {
        print_table(rows, a.table == AUDIT_TABLE_BLOCKED ? blocked_cols : route_cols);
    }
    cJSON_Delete(rows);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "vaultgate audit: cannot write the output\n");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}
