#!/usr/bin/env python3
"""Every metric a Prometheus rule or a Grafana panel of deploy/ names must be one a node exports.

usage: metric_names.py RULES.yml DASHBOARD.json SCRAPE.txt
Reads the rule expressions (groups[].rules[].expr) and every panel target's expr, takes each
dayshard_* name in them, and compares with the sample names of a /metrics scrape of a running
node. Prints each missing name with where it is used and exits 1; exits 0 when all exist (and
prints how many names were checked, so a pass over nothing shows).
"""
import json
import re
import sys

import yaml

NAME = re.compile(r"\bdayshard_[a-z0-9_]+")


def rule_exprs(path):
    doc = yaml.safe_load(open(path))
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield "rule %s" % rule.get("alert", rule.get("record")), rule["expr"]


def panel_exprs(path):
    doc = json.load(open(path))
    stack = list(doc.get("panels", []))
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            if "expr" in target:
                yield "panel %s" % panel.get("title"), target["expr"]


def exported(path):
    names = set()
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    have = exported(sys.argv[3])
    used = {}
    for where, expr in list(rule_exprs(sys.argv[1])) + list(panel_exprs(sys.argv[2])):
        for name in NAME.findall(expr):
            used.setdefault(name, []).append(where)
    missing = sorted(n for n in used if n not in have)
    for name in missing:
        print("missing: %s (used by %s)" % (name, "; ".join(used[name])))
    print("checked %d metric names" % len(used))
    sys.exit(1 if missing or not used else 0)


if __name__ == "__main__":
    main()
