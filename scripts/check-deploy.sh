#!/usr/bin/env bash
# Checks deploy/ against the binary it deploys, without a container engine or a running systemd:
#   (a) every systemd unit passes `systemd-analyze verify` (a copy whose ExecStart names BINARY
#       instead of /usr/bin/dayshard, so the check needs no install) and keeps its
#       `systemd-analyze security` exposure at or below DS_DEPLOY_EXPOSURE_MAX (default 2.0);
#   (b) every YAML file parses, and compose.yaml has what it must: Kafka, a one-shot topic
#       creation, two node groups of two nodes, a router over group A with group B as its
#       replica, health checks, and start-up order on health and completion;
#   (c) every `dayshard COMMAND --flag` that deploy/ runs (units' ExecStart, the Dockerfile's
#       ENTRYPOINT + CMD, compose commands, README code lines) names a command `dayshard help`
#       lists and flags `dayshard help COMMAND` prints: it reads the binary, so it stays true
#       as commands and flags change;
#   (d) the Dockerfile builds FROM Debian 12, every package it apt-installs exists there
#       (`apt-cache show`; skipped, saying so, without Debian 12 apt lists), and its runtime
#       stage installs the package of every shared library the binary links;
#   (e) every sample settings file (deploy/**/*.properties, whose first line names its command:
#       "# dayshard COMMAND ...") passes `dayshard config check FILE --command COMMAND`.
#
# usage: scripts/check-deploy.sh BINARY [DEPLOY_DIR]   (DEPLOY_DIR defaults to the repo's deploy/)
# DS_DEPLOY_SKIP_APT=1 skips (d)'s apt-cache lookup, the slow part (about 1 s: apt reads its
# lists afresh each run); tests/integration/test_deploy.sh sets it for cases not about apt.
# Exit status: 0 all checks pass, 1 a check failed (each failure is one line naming the file),
# 2 usage error.
set -euo pipefail

usage() {
  echo "usage: $0 DAYSHARD_BINARY [DEPLOY_DIR]" >&2
  exit 2
}
[[ $# -ge 1 && $# -le 2 ]] || usage
BINARY=$1
DEPLOY=${2:-"$(cd "$(dirname "$0")/.." && pwd)/deploy"}
PY=/usr/bin/python3
EXPOSURE_MAX=${DS_DEPLOY_EXPOSURE_MAX:-2.0}

if [[ ! -x $BINARY ]]; then
  echo "check-deploy: $BINARY: not an executable file" >&2
  exit 2
fi
if [[ ! -d $DEPLOY ]]; then
  echo "check-deploy: $DEPLOY: no such directory" >&2
  exit 2
fi
BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
DEPLOY=$(cd "$DEPLOY" && pwd)

failures=0
fail() {
  echo "check-deploy: FAIL: $*" >&2
  failures=$((failures + 1))
}
note() { echo "check-deploy: $*"; }

TMP=$(mktemp -d /tmp/dayshard-check-deploy-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# ---- (a) systemd units ------------------------------------------------------------------------
units=()
while IFS= read -r -d '' f; do units+=("$f"); done \
  < <(find "$DEPLOY" -type f \( -name '*.service' -o -name '*.socket' -o -name '*.timer' \) -print0 | sort -z)
if ((${#units[@]} == 0)); then
  fail "$DEPLOY: no systemd units found (expected deploy/systemd/*.service)"
elif ! command -v systemd-analyze >/dev/null; then
  fail "systemd-analyze not found (Debian package systemd): cannot verify ${#units[@]} units"
else
  # The copies name the built binary; a template X@.service is verified as the instance
  # X@check.service, which systemd loads from the template beside it.
  verify=()
  declare -A source_of # a verified unit's name -> its file under deploy/
  for f in "${units[@]}"; do
    name=$(basename "$f")
    sed "s#/usr/bin/dayshard\\b#$BINARY#g" "$f" > "$TMP/$name"
    if [[ $name == *@.* ]]; then
      verify+=("$TMP/${name/@./@check.}")
    else
      verify+=("$TMP/$name")
    fi
    source_of[$(basename "${verify[-1]}")]=${f#"$DEPLOY"/}
  done
  set +e
  (cd "$TMP" && systemd-analyze verify "${verify[@]}") > "$TMP/verify.out" 2>&1
  rc=$?
  set -e
  # Any line naming one of our units is a finding (unknown keys, bad values, a missing binary
  # only warn with exit 0); lines about the host's own units are shown but not counted.
  ours=0
  while IFS= read -r line; do
    hit=0
    for f in "${units[@]}"; do
      name=$(basename "$f")
      stem=${name%%@*}
      stem=${stem%.*}
      if [[ $line == *"$stem"* ]]; then
        fail "${f#"$DEPLOY"/}: systemd-analyze verify: ${line//$TMP\//}"
        hit=1
        ours=1
        break
      fi
    done
    ((hit)) || note "systemd-analyze verify (not one of ours): $line"
  done < "$TMP/verify.out"
  if ((rc != 0 && ours == 0)); then
    fail "systemd-analyze verify exited $rc: $(head -c 300 "$TMP/verify.out")"
  fi
  ((rc != 0 || ours)) || note "systemd-analyze verify: ${#units[@]} units clean"

  # Exposure scores: a regression guard on the hardening (systemd >= 250 scores offline).
  threshold=$("$PY" -c "import sys; print(int(round(float(sys.argv[1]) * 10)))" "$EXPOSURE_MAX")
  for v in "${verify[@]}"; do
    [[ $v == *.service ]] || continue
    set +e
    out=$(cd "$TMP" && systemd-analyze security --offline=true --no-pager \
      --threshold="$threshold" "./$(basename "$v")" 2>&1)
    rc=$?
    set -e
    score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
    if [[ -z $score ]]; then
      note "systemd-analyze security: no offline score here (systemd < 250?), skipped: $(head -c 200 <<<"$out")"
      break
    fi
    unit=$(basename "$v")
    if ((rc != 0)); then
      fail "${source_of[$unit]}: systemd-analyze security exposure $score is above $EXPOSURE_MAX (DS_DEPLOY_EXPOSURE_MAX)"
    else
      note "systemd-analyze security: $unit exposure $score (at most $EXPOSURE_MAX)"
    fi
  done
fi

# ---- (b), (c), (d): parsing in Python -----------------------------------------------------------
# `dayshard help` and `dayshard help COMMAND` for every command it lists, captured here so the
# Python side only parses text.
if ! "$BINARY" help > "$TMP/help" 2>&1; then
  fail "$BINARY help: exit status not 0: $(head -c 300 "$TMP/help")"
fi
mkdir -p "$TMP/helps"
for cmd in $(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' "$TMP/help"); do
  "$BINARY" help "$cmd" > "$TMP/helps/$cmd" 2>&1 || true
done

set +e
"$PY" - "$DEPLOY" "$TMP/help" "$TMP/helps" "$BINARY" <<'PYEOF'
import json, os, re, shlex, subprocess, sys

deploy, help_path, helps_dir, binary = sys.argv[1:5]
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("check-deploy: FAIL: " + msg, file=sys.stderr)


def note(msg):
    print("check-deploy: " + msg)


def rel(path):
    return os.path.relpath(path, deploy)


try:
    import yaml
except ImportError:
    yaml = None
    fail("python3 has no yaml module (Debian package python3-yaml): cannot parse YAML")

# ---- what the binary offers ----
commands = set()
text = open(help_path).read()
m = re.search(r"^commands:\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
if m:
    commands = set(re.findall(r"^  ([a-z][a-z0-9-]*) ", m.group(1), re.M))
if not commands:
    fail("`dayshard help` lists no commands (under 'commands:'); cannot check references")
FLAG = r"(?<![\w-])(--[a-z0-9][a-z0-9-]*|-[A-Za-z])\b"


def every_command_flags(help_text):
    """Flags a sentence "Every command (also) takes --x ..." gives all commands."""
    got = set()
    for line in help_text.splitlines():
        if line.startswith("Every command"):
            got.update(re.findall(FLAG, line))
    return got


common_flags = every_command_flags(text)
flags = {}
for cmd in commands:
    h = open(os.path.join(helps_dir, cmd)).read()
    # Flags are what the usage line names, the option lines start with, and what "Every
    # command takes" sentences (here or in `dayshard help`) add.
    got = set(common_flags) | every_command_flags(h)
    for line in h.splitlines():
        if line.startswith("usage:"):
            got.update(re.findall(FLAG, line))
        om = re.match(r"^ {1,4}(--[a-z0-9][a-z0-9-]*|-[A-Za-z])\b", line)
        if om:
            got.add(om.group(1))
    flags[cmd] = got


def check_invocation(where, argv):
    """argv: the words after `dayshard`. Checks the command and every flag."""
    if not argv:
        return
    cmd = argv[0]
    if cmd not in commands:
        fail("%s: runs `dayshard %s`, but `dayshard help` lists no command '%s'"
             % (where, cmd, cmd))
        return
    for word in argv[1:]:
        if not word.startswith("-") or word in ("-", "--"):
            continue
        if re.match(r"^-\d", word):  # a negative number is a value
            continue
        flag = word.split("=", 1)[0]
        if flag not in flags[cmd]:
            fail("%s: `dayshard %s` has no flag %s (not in `dayshard help %s`)"
                 % (where, cmd, flag, cmd))


def dayshard_argv(words):
    """The words after a `dayshard` program word, or None if words do not run dayshard."""
    if words and os.path.basename(words[0]) == "dayshard":
        return words[1:]
    return None


checked = 0

# ---- (c) systemd units: ExecStart and friends ----
for root, _, files in os.walk(deploy):
    for name in sorted(files):
        if not re.search(r"\.(service|socket|timer)$", name):
            continue
        path = os.path.join(root, name)
        logical = ""
        for number, raw in enumerate(open(path), 1):
            line = raw.rstrip("\n")
            if logical:
                line = logical + line
                logical = ""
            if line.endswith("\\"):
                logical = line[:-1] + " "
                continue
            em = re.match(r"^(ExecStart|ExecStartPre|ExecStartPost|ExecReload|ExecStop)=(.*)$",
                          line)
            if not em:
                continue
            value = em.group(2).lstrip("-@:+!")
            try:
                words = shlex.split(value)
            except ValueError as e:
                fail("%s:%d: %s= does not split into words: %s" % (rel(path), number, em.group(1), e))
                continue
            argv = dayshard_argv(words)
            if argv is not None:
                check_invocation("%s:%d (%s=)" % (rel(path), number, em.group(1)), argv)
                checked += 1

# ---- (c) and (d) Dockerfiles ----
dockerfiles = []
for root, _, files in os.walk(deploy):
    for name in sorted(files):
        if name == "Dockerfile" or name.endswith(".Dockerfile") or name.startswith("Dockerfile."):
            dockerfiles.append(os.path.join(root, name))
entrypoint_dayshard = False
apt_packages = []  # (file, line, package)
runtime_packages = set()  # what the last stage of the last Dockerfile apt-installs
for path in dockerfiles:
    # Instructions with their continuation lines joined, and the line each starts on.
    instructions = []
    current, start = "", 0
    for number, raw in enumerate(open(path), 1):
        line = raw.rstrip("\n")
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue
        if not current:
            start = number
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        instructions.append((start, current.strip()))
        current = ""
    entrypoint, cmd, cmd_line, stages = None, None, 0, 0
    for number, ins in instructions:
        keyword, _, rest = ins.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stages += 1
            image = rest.split()[0]
            if not re.match(r"^(docker\.io/(library/)?)?debian:bookworm(-slim)?(@sha256:[0-9a-f]+)?$",
                            image):
                fail("%s:%d: FROM %s is not Debian 12 (debian:bookworm-slim)" % (rel(path), number, image))
            entrypoint, cmd = None, None  # each stage starts afresh
            runtime_packages = set()
        elif keyword in ("ENTRYPOINT", "CMD"):
            try:
                words = json.loads(rest)
            except ValueError:
                words = shlex.split(rest)  # shell form
            if keyword == "ENTRYPOINT":
                entrypoint = (number, words)
            else:
                cmd, cmd_line = words, number
        elif keyword == "RUN":
            try:
                lexer = shlex.shlex(rest, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                tokens = list(lexer)
            except ValueError as e:
                fail("%s:%d: RUN does not split into words: %s" % (rel(path), number, e))
                tokens = []
            # Simple commands, split at the shell's operators.
            parts, words = [], []
            for t in tokens:
                if t and all(c in "&|;<>()" for c in t):
                    parts.append(words)
                    words = []
                else:
                    words.append(t)
            parts.append(words)
            for words in parts:
                if len(words) >= 2 and words[0] == "apt-get" and "install" in words:
                    for w in words[words.index("install") + 1:]:
                        if not w.startswith("-"):
                            apt_packages.append((rel(path), number, w))
                            runtime_packages.add(w)
                argv = dayshard_argv(words)
                if argv is not None:
                    check_invocation("%s:%d (RUN)" % (rel(path), number), argv)
                    checked += 1
    if stages < 2:
        fail("%s: %d stage(s); expected a build stage and a runtime stage" % (rel(path), stages))
    # The final stage's ENTRYPOINT + CMD is what `docker run IMAGE` runs.
    if entrypoint is not None and dayshard_argv(entrypoint[1]) is not None:
        entrypoint_dayshard = True
        argv = dayshard_argv(entrypoint[1]) + (cmd or [])
        check_invocation("%s:%d (ENTRYPOINT + CMD)" % (rel(path), cmd_line or entrypoint[0]), argv)
        checked += 1
    elif cmd is not None and dayshard_argv(cmd) is not None:
        check_invocation("%s:%d (CMD)" % (rel(path), cmd_line), dayshard_argv(cmd))
        checked += 1

# ---- (b) and (c) YAML files, compose.yaml ----
yaml_files = []
for root, _, files in os.walk(deploy):
    for name in sorted(files):
        if name.endswith((".yaml", ".yml")):
            yaml_files.append(os.path.join(root, name))
documents = {}
if yaml is not None:
    for path in yaml_files:
        try:
            documents[path] = yaml.safe_load(open(path))
        except yaml.YAMLError as e:
            fail("%s: not valid YAML: %s" % (rel(path), str(e).replace("\n", " ")))
    if yaml_files:
        note("%d YAML file(s) parse" % (len(yaml_files) - sum(1 for p in yaml_files if p not in documents)))

compose_path = os.path.join(deploy, "compose.yaml")
compose = documents.get(compose_path)
if yaml is not None and not os.path.exists(compose_path):
    fail("compose.yaml: missing")
if isinstance(compose, dict):
    services = compose.get("services") or {}
    if not isinstance(services, dict):
        fail("compose.yaml: 'services' is not a mapping")
        services = {}

    def words_of(value):
        if value is None:
            return []
        if isinstance(value, list):
            return [str(v) for v in value]
        return shlex.split(str(value))

    def runs_dayshard(svc):
        build = svc.get("build")
        if isinstance(build, dict) and "deploy/Dockerfile" in str(build.get("dockerfile", "")):
            return True
        image = str(svc.get("image", ""))
        return "dayshard" in image.split("/")[-1]

    def healthcheck_ok(name, svc):
        hc = svc.get("healthcheck")
        if not isinstance(hc, dict) or hc.get("disable") or not hc.get("test") \
                or words_of(hc.get("test"))[:1] == ["NONE"]:
            fail("compose.yaml: service '%s' has no health check" % name)
            return False
        return True

    def depends(name, svc, other, condition):
        dep = svc.get("depends_on") or {}
        got = dep.get(other, {}).get("condition") if isinstance(dep, dict) else None
        if got != condition:
            fail("compose.yaml: service '%s' does not wait for '%s' (depends_on condition: %s)"
                 % (name, other, condition))

    kafka, topic_jobs, nodes, routers = [], [], {}, []
    for name, svc in services.items():
        if not isinstance(svc, dict):
            fail("compose.yaml: service '%s' is not a mapping" % name)
            continue
        image = str(svc.get("image", ""))
        command = words_of(svc.get("command"))
        entry = words_of(svc.get("entrypoint"))
        if runs_dayshard(svc):
            argv = command
            if entry:
                argv = dayshard_argv(entry)
                argv = None if argv is None else argv + command
            if argv is not None:
                check_invocation("compose.yaml: service '%s' (command)" % name, argv)
                checked += 1
                if argv[:1] == ["run"]:
                    group = argv[argv.index("--group") + 1] if "--group" in argv[:-1] else None
                    nodes[name] = group
                elif argv[:1] == ["router"]:
                    routers.append((name, argv))
        elif image.startswith(("apache/kafka:", "docker.io/apache/kafka:")):
            script = " ".join(entry + command)
            if "kafka-topics.sh" in script and "--create" in script:
                topic_jobs.append(name)
            else:
                kafka.append(name)
    if not kafka:
        fail("compose.yaml: no Kafka service (image apache/kafka)")
    for name in kafka:
        env = services[name].get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env if "=" in e)
        if "controller" not in str(env.get("KAFKA_PROCESS_ROLES", "")):
            fail("compose.yaml: service '%s' is not in KRaft mode (KAFKA_PROCESS_ROLES has no "
                 "controller)" % name)
        healthcheck_ok(name, services[name])
    if not topic_jobs:
        fail("compose.yaml: no one-shot topic creation (apache/kafka running kafka-topics.sh --create)")
    for name in topic_jobs:
        if kafka:
            depends(name, services[name], kafka[0], "service_healthy")
    groups = {}
    for name, group in nodes.items():
        groups.setdefault(group, []).append(name)
        healthcheck_ok(name, services[name])
        for job in topic_jobs:
            depends(name, services[name], job, "service_completed_successfully")
    if len(nodes) < 4 or len([g for g, members in groups.items() if len(members) >= 2]) < 2:
        fail("compose.yaml: expected two node groups of two nodes each (`dayshard run --group G`); "
             "found %s" % ({g: sorted(m) for g, m in groups.items()} or "no nodes"))
    if not routers:
        fail("compose.yaml: no router service (`dayshard router`)")
    for name, argv in routers:
        healthcheck_ok(name, services[name])

        def hosts(flag):
            if flag not in argv[:-1]:
                return []
            urls = argv[argv.index(flag) + 1].split(",")
            return [re.sub(r"^[a-z]+://([^:/]+).*$", r"\1", u) for u in urls]

        primary, replica = hosts("--node"), hosts("--replica")
        for flag, names in (("--node", primary), ("--replica", replica)):
            unknown = [h for h in names if h not in nodes]
            if not names:
                fail("compose.yaml: router '%s' has no %s" % (name, flag))
            elif unknown:
                fail("compose.yaml: router '%s' %s names %s, not node services"
                     % (name, flag, ", ".join(unknown)))
            elif len({nodes[h] for h in names}) != 1:
                fail("compose.yaml: router '%s' %s mixes consumer groups" % (name, flag))
        if primary and replica and set(primary) <= set(nodes) and set(replica) <= set(nodes):
            if nodes[primary[0]] == nodes[replica[0]]:
                fail("compose.yaml: router '%s': --replica is the same consumer group as --node"
                     % name)
            for h in primary + replica:
                depends(name, services[name], h, "service_healthy")
    note("compose.yaml: kafka %s, topic creation %s, nodes %s, router %s"
         % (kafka, topic_jobs, {g: sorted(m) for g, m in groups.items()}, [r[0] for r in routers]))

# ---- (c) README code lines: `dayshard COMMAND ...` at the start of a line in a code block ----
for root, _, files in os.walk(deploy):
    for name in sorted(files):
        if not name.endswith(".md"):
            continue
        path = os.path.join(root, name)
        fenced = False
        for number, raw in enumerate(open(path), 1):
            line = raw.rstrip("\n")
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            code = re.sub(r"^\s*(\$\s+|sudo\s+)?", "", line)
            code = re.split(r"\s(?:\||&&|;|>|2>|#)\s?", code)[0]
            try:
                words = shlex.split(code)
            except ValueError:
                continue
            argv = dayshard_argv(words)
            if argv:
                check_invocation("%s:%d" % (rel(path), number), argv)
                checked += 1

if checked == 0:
    fail("%s: no `dayshard` invocation found to check" % deploy)
else:
    note("%d dayshard invocations checked against `dayshard help`" % checked)

# ---- (d) apt packages exist in Debian 12 ----
if not entrypoint_dayshard and dockerfiles:
    fail("%s: ENTRYPOINT is not the dayshard binary" % ", ".join(rel(p) for p in dockerfiles))
codename = ""
try:
    for line in open("/etc/os-release"):
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
except OSError:
    pass
lists = [f for f in os.listdir("/var/lib/apt/lists")] if os.path.isdir("/var/lib/apt/lists") else []
if not apt_packages:
    if dockerfiles:
        fail("%s: no apt-get install found" % ", ".join(rel(p) for p in dockerfiles))
elif os.environ.get("DS_DEPLOY_SKIP_APT", "") not in ("", "0"):
    note("apt packages: DS_DEPLOY_SKIP_APT is set: skipped")
elif codename != "bookworm":
    note("apt packages: this host is not Debian 12 (VERSION_CODENAME=%s): skipped" % (codename or "?"))
elif not any("_Packages" in f for f in lists):
    note("apt packages: no apt lists here (run apt-get update): skipped")
else:
    # One apt-cache run for them all (each run reads the lists again: about 1 s here).
    names = sorted({package for _, _, package in apt_packages})
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + names,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    found = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
    missing = 0
    for path, number, package in apt_packages:
        if package not in found:
            fail("%s:%d: apt package '%s' does not exist in Debian 12" % (path, number, package))
            missing += 1
    if not missing:
        note("apt packages: %d exist in Debian 12" % len(apt_packages))

# ---- (d) the runtime stage installs every shared library the binary needs ----
# Each library the binary names (ELF NEEDED) must come from a package the last stage installs,
# or from libc6 (in every Debian image). Asked of this host's dpkg, which knows the owners when
# the host is Debian 12 with the -dev packages installed, as CI is.
if dockerfiles and codename == "bookworm":
    try:
        r = subprocess.run(["objdump", "-p", binary], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        needed = re.findall(r"^\s*NEEDED\s+(\S+)$", r.stdout, re.M)
    except OSError:
        needed = []
    # A sanitizer build (CI's ASan pass runs this check too) links its runtime; the image
    # builds Release, which does not.
    sanitizers = [lib for lib in needed if re.match(r"lib(a|ub|t|l|hwa)san\.so", lib)]
    if sanitizers:
        note("runtime libraries: %s: a sanitizer build's runtime, not the image's: skipped"
             % ", ".join(sanitizers))
        needed = [lib for lib in needed if lib not in sanitizers]
    if not needed:
        note("runtime libraries: objdump (binutils) found no NEEDED entries: skipped")
    else:
        # The libraries' paths from the loader's cache, each also under its usrmerge alias
        # (/lib/x <-> /usr/lib/x: dpkg knows one of the two); a glob for any it does not know.
        # One dpkg run for them all: "pkg[:arch], ...: path" (exact paths take 0.1 s, globs
        # about 0.1 s each).
        r = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        paths = {}
        for line in r.stdout.splitlines():
            lm = re.match(r"^\s*(\S+) \(.*\) => (/\S+)$", line)
            if lm and lm.group(1) in needed:
                p = lm.group(2)
                alias = p[4:] if p.startswith("/usr/") else "/usr" + p
                paths.setdefault(lm.group(1), []).extend([p, alias])
        patterns = []
        for lib in needed:
            patterns.extend(paths.get(lib, ["*/" + lib]))
        r = subprocess.run(["dpkg", "-S"] + patterns,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        owners_of = {}
        for line in r.stdout.splitlines():
            packages, _, path = line.rpartition(": ")
            for owner in packages.split(","):
                owners_of.setdefault(os.path.basename(path), set()).add(owner.strip().split(":")[0])
        unowned = 0
        for lib in needed:
            owners = owners_of.get(lib, set())
            if not owners:
                note("runtime libraries: no installed package owns %s here: not checked" % lib)
                continue
            if not owners & (runtime_packages | {"libc6"}):
                fail("%s: the binary needs %s (Debian package %s), which the runtime stage "
                     "does not apt-install" % (rel(dockerfiles[-1]), lib, " or ".join(sorted(owners))))
                unowned += 1
        if not unowned:
            note("runtime libraries: the %d the binary needs come from the runtime stage's packages"
                 % len(needed))

sys.exit(1 if failures else 0)
PYEOF
rc=$?
set -e
((rc == 0)) || failures=$((failures + 1))

# ---- (e) sample settings files ------------------------------------------------------------------
while IFS= read -r -d '' f; do
  name=${f#"$DEPLOY"/}
  cmd=$(sed -n '1s/^# *dayshard \([a-z][a-z0-9-]*\)\b.*/\1/p' "$f")
  if [[ -z $cmd ]]; then
    fail "$name: the first line does not name its command (# dayshard COMMAND ...)"
  elif ! grep -q '^  config ' "$TMP/help"; then
    fail "$name: \`dayshard help\` lists no config command to check it with"
  elif ! out=$("$BINARY" config check "$f" --command "$cmd" 2>&1); then
    while IFS= read -r line; do
      fail "$name: dayshard config check --command $cmd: ${line//$DEPLOY\//}"
    done <<<"$out"
  else
    note "$name: dayshard config check --command $cmd: ${out//$DEPLOY\//}"
  fi
done < <(find "$DEPLOY" -type f -name '*.properties' -print0 | sort -z)

if ((failures)); then
  echo "check-deploy: $DEPLOY: FAILED" >&2
  exit 1
fi
echo "check-deploy: $DEPLOY: ok"
