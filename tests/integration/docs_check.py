#!/usr/bin/env python3
"""The docs name only what exists, and every flag that exists is documented.

usage: docs_check.py DAYSHARD SRC [DOCS_ROOT]

Reads README.md, docs/*.md and deploy/README.md under DOCS_ROOT (default SRC) and checks, against
the binary DAYSHARD and the source tree SRC:
  - every `dayshard CMD ...` written in code (fenced blocks and `spans`) names a command of
    `dayshard help` (and a subcommand of `dayshard help CMD` for gsi and config), and each of its
    flags is one `dayshard help CMD` prints;
  - every other `--flag` in code is a flag of some dayshard command or of a script in scripts/;
  - every flag of every command appears in docs/CONFIGURATION.md, in the section whose heading
    names the command;
  - every HTTP path (/v1/..., /metrics, /healthz, /readyz) is one the query service routes
    (query/serve_request.c);
  - every metric (dayshard_*) is one the source writes;
  - every fuzz target (fuzz_*) has its tests/fuzz/fuzz_*.c;
  - every environment variable (DS_*, DAYSHARD_*) is one the source reads, or DAYSHARD_<KEY>
    for a settings key;
  - every relative link names a file that exists and, into a Markdown file, one of its headings.
Prints each failure with the file and line, and a summary of what it checked (so a pass over
nothing shows); exits 1 on any failure.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

FLAG = r"(?<![\w-])(--[a-z0-9][a-z0-9-]*|-[A-Za-z])\b"
LONG_FLAG = re.compile(r"(?<![\w/.-])--[a-z][a-z0-9-]*[a-z0-9](?!-?[A-Z])")
# Words that stand for any flag in prose about flags in general.
PLACEHOLDER_FLAGS = {"--flag", "--name", "--option"}
PATH = re.compile(r"(?<![\w.:/-])(/v1/[A-Za-z0-9_{}%./-]*[A-Za-z0-9_}/]|/v1\b|/metrics|/healthz|/readyz)")
METRIC = re.compile(r"\bdayshard_[a-z0-9_]*[a-z0-9]")
FUZZ = re.compile(r"\bfuzz_[a-z0-9_]*[a-z0-9]")
ENV = re.compile(r"\b(?:DS|DAYSHARD)_[A-Z0-9_]*[A-Z0-9]\b")
SEPARATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", ")", "\\"}
SUBCOMMANDS = ("gsi", "config")
# Words that run the program after them.
PREFIXES = {"$", "sudo", "exec", "nice", "time", "timeout", "env", "xargs", "then", "do"}

failures = []
counts = {}


def fail(where, msg):
    failures.append("%s: %s" % (where, msg))


def seen(kind):
    counts[kind] = counts.get(kind, 0) + 1


def run_help(binary, *args):
    p = subprocess.run([binary, "help", *args], capture_output=True, text=True)
    return p.stdout + p.stderr


def every_command_flags(text):
    """Flags a sentence "Every command (also) takes --x ..." gives all commands."""
    got = set()
    for paragraph in re.split(r"\n\s*\n", text):
        for m in re.finditer(r"^Every command[^.]*", paragraph, re.M):
            got.update(re.findall(FLAG, m.group(0)))
    return got


def load_binary(binary):
    """commands, {command: flags}, {command: subcommands}."""
    top = run_help(binary)
    m = re.search(r"^commands:\n(.*?)(?:\n\n|\Z)", top, re.S | re.M)
    commands = set(re.findall(r"^  ([a-z][a-z0-9-]*) ", m.group(1), re.M)) if m else set()
    if not commands:
        sys.exit("docs_check: `%s help` lists no commands" % binary)
    common = every_command_flags(top)
    flags, subs = {}, {}
    for cmd in commands:
        h = run_help(binary, cmd)
        got = set(common) | every_command_flags(h)
        for line in h.splitlines():
            if re.match(r"^(usage:| {7}dayshard )", line):
                got.update(re.findall(FLAG, line))
            om = re.match(r"^ {1,4}(--[a-z0-9][a-z0-9-]*|-[A-Za-z])\b", line)
            if om:
                got.add(om.group(1))
        flags[cmd] = got
        subs[cmd] = set(re.findall(r"dayshard %s ([a-z][a-z-]*)" % cmd, h)) if cmd in SUBCOMMANDS else set()
    return commands, flags, subs


def script_flags(src):
    """Flags the scripts in scripts/ take: each `--x)` case arm or `--x` they compare with."""
    got = set()
    for path in glob.glob(os.path.join(src, "scripts", "*.sh")):
        got.update(re.findall(r"(--[a-z][a-z0-9-]*)\)", open(path).read()))
    return got


def source_files(src):
    """Every file of the tree but build directories and .git."""
    for top, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".git"))]
        for f in files:
            yield os.path.relpath(os.path.join(top, f), src)


def source_text(src, patterns):
    """The text of the files whose path matches one of the regexes (but this check's own test,
    which writes made-up names on purpose)."""
    out = []
    for rel in source_files(src):
        if rel.endswith("test_docs.sh"):
            continue
        if any(re.search(p, rel) for p in patterns):
            out.append(open(os.path.join(src, rel), errors="replace").read())
    return "\n".join(out)


def routes(src):
    """Regexes of the paths query/serve_request.c routes."""
    text = open(os.path.join(src, "query", "serve_request.c")).read()
    exact = re.findall(r'\{"(/[^"]*)", QUERY_EP_', text)
    out = [re.compile(re.escape(p) + r"\Z") for p in exact]
    lit = dict(re.findall(r'static const char (\w+)\[\] = "([^"]*)";', text))
    if "customers" in lit and "suffix" in lit:
        out.append(re.compile(re.escape(lit["customers"]) + r"[^/]+" + re.escape(lit["suffix"]) + r"\Z"))
    if "orders" in lit:
        out.append(re.compile(re.escape(lit["orders"]) + r"[^/]*\Z"))  # no id: a routed 400
    if not exact:
        sys.exit("docs_check: no routes found in query/serve_request.c")
    return out


def doc_files(root):
    files = [os.path.join(root, "README.md"), os.path.join(root, "deploy", "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.exists(f)]


SHELL_BLOCKS = ("", "sh", "bash", "shell", "console")


def code_pieces(path):
    """(line number, text, is_block) of every line of a shell code block (```, ```sh, ...; not
    ```json, ```text and the like, which show file contents) and every inline code span."""
    in_block, shell = False, False
    for n, line in enumerate(open(path), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            shell = line.strip()[3:].strip() in SHELL_BLOCKS
            continue
        if in_block:
            if shell:
                yield n, line.rstrip("\n"), True
        else:
            for span in re.findall(r"``(.+?)``|`([^`]+)`", line):
                yield n, span[0] or span[1], False


def words_of(text):
    text = text.split(" #", 1)[0] if not text.startswith("#") else ""
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def check_invocations(where, text, binary_info, covered):
    commands, flags, subs = binary_info
    words = words_of(text)
    for i, w in enumerate(words):
        if os.path.basename(w) != "dayshard" or i + 1 >= len(words):
            continue
        before = words[i - 1] if i > 0 else ""
        if i > 0 and before not in SEPARATORS and before not in PREFIXES and \
                not re.match(r"^[A-Z_][A-Z0-9_]*=", before):
            continue  # a word in a message ("not a dayshard data directory"), not a program
        argv = []
        for a in words[i + 1:]:
            if a in SEPARATORS or a.startswith((">", "2>", "|")):
                break
            argv.append(a)
        if not argv or not re.match(r"^[a-z][a-z0-9-]*$", argv[0]):
            continue  # `dayshard <command>`, `dayshard CMD`, `dayshard run: ...` (a message)
        cmd = argv[0]
        seen("command")
        if cmd == "help":
            if len(argv) > 1 and re.match(r"^[a-z]", argv[1]) and argv[1] not in commands:
                fail(where, "`dayshard help %s`: no command '%s'" % (argv[1], argv[1]))
            continue
        if cmd not in commands:
            fail(where, "`dayshard %s`: `dayshard help` lists no command '%s'" % (cmd, cmd))
            continue
        if subs.get(cmd) and len(argv) > 1 and re.match(r"^[a-z]+$", argv[1]):
            if argv[1] not in subs[cmd]:
                fail(where, "`dayshard %s %s`: no such subcommand (have %s)"
                     % (cmd, argv[1], ", ".join(sorted(subs[cmd]))))
        for a in argv[1:]:
            if not a.startswith("-") or a in ("-", "--") or re.match(r"^-\d", a):
                continue
            flag = a.split("=", 1)[0]
            if not re.match(r"^(--[a-z0-9][a-z0-9-]*|-[A-Za-z])$", flag):
                continue
            seen("flag of a command")
            covered.add(flag)
            if flag not in flags[cmd]:
                fail(where, "`dayshard %s` has no flag %s (not in `dayshard help %s`)"
                     % (cmd, flag, cmd))


def other_program(words, commands):
    """True when code words run something other than dayshard or our scripts (cmake, curl,
    kafka-topics.sh, ...), or dayshard with a placeholder command (`dayshard CMD --flag`)."""
    while words and re.match(r"^\(?[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    words = [w.lstrip("(") for w in words]
    if not words:
        return False
    for i, w in enumerate(words):
        if os.path.basename(w) == "dayshard":
            return i + 1 < len(words) and not re.match(r"^[a-z-]", words[i + 1])
    first = words[0]
    if first.startswith("-"):
        return False
    if first.endswith(".sh"):
        return not re.match(r"^(\./)?scripts/", first)
    return re.match(r"^[a-z][a-z0-9_.+-]*$", first) is not None and first not in commands


def check_loose_flags(where, text, all_flags, scripts):
    if other_program(words_of(text), all_flags["__commands"]):
        return
    for flag in LONG_FLAG.findall(text):
        if flag in PLACEHOLDER_FLAGS:
            continue
        seen("flag")
        if flag not in all_flags["__union"] and flag not in scripts:
            fail(where, "%s is not a flag of any dayshard command or script" % flag)


def check_names(where, text, route_res, metrics_src, fuzz_targets, env_src, keys):
    for p in PATH.findall(text):
        path = p.split("?", 1)[0].rstrip(".")
        if path in ("/v1", "/v1/") or re.search(r"\b404\b|no such path", text):
            continue  # the prefix alone, or an example of the 404 an unknown path gets
        seen("HTTP path")
        if not any(r.match(path) for r in route_res):
            fail(where, "HTTP path %s is not one the query service routes" % path)
    for m in METRIC.findall(text):
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        seen("metric")
        if m not in metrics_src and base not in metrics_src:
            fail(where, "metric %s: no source writes it" % m)
    for f in FUZZ.findall(text):
        seen("fuzz target")
        if f[len("fuzz_"):] not in fuzz_targets:
            fail(where, "fuzz target %s: no tests/fuzz/%s.c" % (f, f))
    for v in ENV.findall(text):
        seen("environment variable")
        if re.search(r"\b%s\b" % v, env_src):
            continue
        if v.startswith("DAYSHARD_") and v[len("DAYSHARD_"):].lower().replace("_", "-") in keys:
            continue
        if v.startswith("DAYSHARD_KAFKA_") or v in ("DAYSHARD_CONFIG",):
            if "DAYSHARD_" in env_src:
                continue
        fail(where, "environment variable %s: nothing reads it" % v)


def heading_anchors(path):
    """The anchors a Markdown renderer gives a file's headings (GitHub's rule: lower case,
    punctuation but - and _ dropped, spaces to -, a repeat gets -1, -2, ...)."""
    out, seen, in_block = set(), {}, False
    for line in open(path):
        if line.lstrip().startswith("```"):
            in_block = not in_block
        m = None if in_block else re.match(r"^#{1,6} (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def check_links(path, root):
    """Every relative link names a file of the repository and, into a Markdown file, a heading
    it has."""
    in_block = False
    for n, line in enumerate(open(path), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue
            seen("link")
            file, _, anchor = target.partition("#")
            where = "%s:%d" % (os.path.relpath(path, root), n)
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                fail(where, "link %s: no such file" % target)
            elif anchor and dest.endswith(".md") and anchor not in heading_anchors(dest):
                fail(where, "link %s: %s has no heading with that anchor"
                     % (target, os.path.relpath(dest, root)))


def config_sections(path):
    """{command: text of the sections whose heading names it}."""
    out = {}
    if not os.path.exists(path):
        return out
    heading, level, body = None, 0, []

    def flush():
        if heading is not None:
            names = re.findall(r"dayshard ([a-z][a-z0-9-]*)", heading)
            bare = heading.strip().strip("`")
            names += [bare] if re.match(r"^[a-z][a-z0-9-]*$", bare) else []
            for cmd in names:
                out[cmd] = out.get(cmd, "") + "\n".join(body)

    for line in open(path):
        m = re.match(r"^(#{1,6}) (.*)", line)
        if m:
            if heading is None or len(m.group(1)) <= level or "dayshard " in m.group(2) or \
                    re.match(r"^`?[a-z][a-z0-9-]*`?$", m.group(2).strip()):
                flush()
                heading, level, body = m.group(2), len(m.group(1)), []
                continue
        body.append(line.rstrip("\n"))
    flush()
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    binary, src = sys.argv[1], sys.argv[2]
    root = sys.argv[3] if len(sys.argv) == 4 else src
    commands, flags, subs = load_binary(binary)
    union = set().union(*flags.values())
    all_flags = {"__union": union, "__commands": commands}
    scripts = script_flags(src)
    route_res = routes(src)
    metrics_src = source_text(src, [r"^(?!tests/)[^/]+/.*\.(c|h|js)$", r"^deploy/"])
    fuzz_targets = {os.path.basename(p)[len("fuzz_"):-2]
                    for p in glob.glob(os.path.join(src, "tests", "fuzz", "fuzz_*.c"))}
    env_src = source_text(src, [r"\.(c|h|sh|py|txt|service)$", r"^deploy/"])
    keys = {f[2:] for f in union if f.startswith("--")}
    covered = set()
    for path in doc_files(root):
        name = os.path.relpath(path, root)
        for n, text, is_block in code_pieces(path):
            where = "%s:%d" % (name, n)
            check_invocations(where, text, (commands, flags, subs), covered)
            check_loose_flags(where, text, all_flags, scripts)
        check_links(path, root)
        for n, line in enumerate(open(path), 1):
            check_names("%s:%d" % (name, n), line, route_res, metrics_src, fuzz_targets, env_src, keys)
    config_path = os.path.join(root, "docs", "CONFIGURATION.md")
    config_text = open(config_path).read() if os.path.exists(config_path) else ""
    sections = config_sections(config_path)
    common = every_command_flags(run_help(binary))
    for cmd in sorted(commands):
        if cmd == "help":
            continue
        if cmd not in sections:
            fail("docs/CONFIGURATION.md", "no section whose heading names `dayshard %s`" % cmd)
            continue
        for flag in sorted(flags[cmd]):
            seen("documented flag")
            # The flags every command takes are documented once, in their own section.
            text = config_text if flag in common else sections[cmd]
            if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), text):
                fail("docs/CONFIGURATION.md", "`dayshard %s %s` exists but its section does not name it"
                     % (cmd, flag))
    for f in failures:
        print("docs_check: FAIL: " + f, file=sys.stderr)
    print("docs_check: checked %s" % ", ".join("%d %ss" % (v, k) for k, v in sorted(counts.items())))
    if failures:
        print("docs_check: %d failures" % len(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
