/*
 * Private to loadgen/: the gate of the load test (loadtest_gate.c). A run's figures as one flat
 * `summary` object of report.json (derived from the run's own fields, so an older document
 * without a summary reads the same way), thresholds over those figures (`--fail-if`), absolute
 * or relative to the run of the same strategy in a baseline report (`--baseline`), and their
 * verdicts, printed, written into report.json ("gate", each run's "baseline_summary") and into
 * report.md. The schema of report.json is docs/LOADTEST_REPORT.md; the field table below is
 * the one place its summary fields are named.
 */
#ifndef DS_LOADGEN_LOADTEST_GATE_H
#define DS_LOADGEN_LOADTEST_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "common/common.h"
#include "loadgen/loadgen.h"
#include "loadgen/loadtest_report.h"

/* report.json's schema: bumped when a field is renamed, removed or changes unit or meaning;
 * a new field keeps it. A document without "schema" is schema 1 (it carries "version": 1).
 * Schema 3: the whole-run query latencies (count_p50_us...) leave out --warmup's seconds. */
#define LOADTEST_REPORT_SCHEMA 3
/* A threshold's text, as the user wrote it: a field name, an operator, a number. */
#define GATE_EXPR_TEXT_SIZE 128
#define GATE_FIELD_NAME_SIZE 48

/* Where a summary field comes from in a run object of report.json. */
enum gate_source {
    GATE_SOURCE_NUMBER,     /* the number at path (a.b: b inside object a) */
    GATE_SOURCE_COUNT,      /* the length of the array at path */
    GATE_SOURCE_SERIES_MAX, /* the largest number of series.<path> */
    GATE_SOURCE_SHARDS_MAX, /* the largest final shard count of any day */
    GATE_SOURCE_ADVICE,     /* the entries of the array "advice" whose "case" is path */
};

struct gate_field {
    const char *name; /* in summary, and in --fail-if */
    const char *unit;
    enum gate_source source;
    const char *path;
    const char *meaning; /* one line for docs and --help */
};

/* The summary fields, in report order; *count set. */
const struct gate_field *gate_fields(size_t *count);
const struct gate_field *gate_field_find(const char *name);
/* Every field's name, space-separated, in table order, into dst (capacity bytes): what an
 * unknown --fail-if field is answered with. Returns the length, or capacity when the list did
 * not fit (dst then holds the whole names that did). */
size_t gate_field_names(char *dst, size_t capacity);

/* run's summary: run["summary"] when it is an object (schema 2), else derived from run's fields
 * (schema 1). A new reference; a figure the run did not measure is null. */
json_t *gate_summary_of(const json_t *run);

/* The summary of a run as written (always derived, never copied). A new reference. */
json_t *gate_summary_derive(const json_t *run);

enum gate_op { GATE_GT, GATE_GE, GATE_LT, GATE_LE, GATE_EQ, GATE_NE };

/* What NUMBER is compared with: the value itself, or the value against the baseline's. */
enum gate_form {
    GATE_ABSOLUTE, /* value OP NUMBER */
    GATE_RATIO,    /* NUMBERx: value OP NUMBER * baseline */
    GATE_PERCENT,  /* NUMBER%: (value - baseline) / |baseline| * 100 OP NUMBER */
};

struct gate_expr {
    char text[GATE_EXPR_TEXT_SIZE]; /* as written, spaces removed */
    char field[GATE_FIELD_NAME_SIZE];
    enum gate_op op;
    enum gate_form form;
    double number;
};

/* Parses text into *e. Returns 0, or -DS_EUSAGE with the reason in why (why_size bytes, naming
 * the field when the field is what is wrong); *e is untouched then. Does not check that the
 * field exists (gate_field_find) nor that a baseline is given: the caller knows both. */
DS_MUST_USE int gate_expr_parse(const char *text, struct gate_expr *e, char *why, size_t why_size);

enum gate_state {
    GATE_PASSED,
    GATE_BREACHED,
    GATE_UNCHECKED, /* no value to compare: counts as a breach, never as a pass */
};

struct gate_verdict {
    enum gate_state state;
    double value;    /* the run's figure (NAN: not measured) */
    double baseline; /* the baseline's (NAN: none, or not measured) */
    double compared; /* what was compared with the number: value, or the change in percent */
    double limit;    /* what `compared` was held against: NUMBER, or NUMBER x baseline */
    const char *why; /* GATE_UNCHECKED: why (a static string) */
};

/* Checks e against a run's summary and, for a relative form, the baseline run's summary (NULL:
 * the baseline has no run of this strategy). A missing or null value is GATE_UNCHECKED. */
void gate_expr_eval(const struct gate_expr *e, const json_t *summary,
                    const json_t *baseline_summary, struct gate_verdict *v);

/* The gate: checks every run of doc (borrowed, updated: "gate" and, with a baseline, each
 * run's "baseline_summary"), prints the comparison and the verdicts to out and each breach to
 * stderr. Returns the number of thresholds breached or unchecked over all runs. */
size_t gate_apply(const struct loadgen_loadtest_gate *gate, json_t *doc, FILE *out);

/* report.md's section on the gate (nothing when doc has no "gate"). */
void gate_md_write(struct report_file *rf, const json_t *doc);

#endif /* DS_LOADGEN_LOADTEST_GATE_H */
