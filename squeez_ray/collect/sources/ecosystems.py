"""Collect raw tool outputs over real third-party code from several ecosystems.

Each recipe prepares one real source tree (fetched from a package registry into
runs/handlabel/cache/), runs real tools in it and yields one raw row per command.
Outputs are stored exactly as printed (stdout+stderr merged in order); only
trailing newlines are stripped. Outputs under 5 or over 3,000 lines are dropped,
never cut. Rows of each finished recipe are cached as cache/rows/<recipe>.jsonl,
so a rerun skips finished recipes and only concatenates.

    python jobs/collect_pool.py ecosystems --out runs/handlabel/pool/ecosystems.jsonl
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sysconfig
import tarfile
import time
from pathlib import Path

from squeez_ray.collect.sources.recipe_tree import CACHE, ROOT, TOOLS, Tree, json_file, sh, version
from squeez_ray.collect.sources.service_logs import logs_recipe, ray_recipe

# ----------------------------------------------------------------- npm (JS/TS)
NPM = [  # (package, version, older version for git diff)
    ("zod", "3.23.8", "3.22.4"), ("date-fns", "3.6.0", "3.3.1"), ("commander", "12.1.0", "11.1.0"),
    ("yargs", "17.7.2", "17.6.2"), ("chalk", "5.3.0", "5.2.0"), ("semver", "7.6.3", "7.5.4"),
    ("uuid", "10.0.0", "9.0.1"), ("lodash-es", "4.17.21", "4.17.20"), ("immer", "10.1.1", "9.0.21"),
    ("js-yaml", "4.1.0", "3.14.1"), ("minimatch", "10.0.1", "9.0.5"), ("superstruct", "2.0.2", "1.0.4"),
]
ESLINTRC = {  # a real rule set: eslint:recommended plus common style/complexity rules
    "root": True, "env": {"es2022": True, "node": True, "browser": True},
    "parserOptions": {"ecmaVersion": "latest", "sourceType": "module"},
    "extends": "eslint:recommended",
    "rules": {"no-var": "error", "prefer-const": "error", "eqeqeq": "error", "curly": "error",
              "no-param-reassign": "warn", "complexity": ["warn", 10], "max-lines-per-function": ["warn", 60],
              "no-plusplus": "warn", "prefer-arrow-callback": "warn", "no-shadow": "warn"},
}
TSESLINTRC = {"root": True, "parser": "@typescript-eslint/parser", "plugins": ["@typescript-eslint"],
              "extends": ["eslint:recommended", "plugin:@typescript-eslint/recommended"],
              "rules": {"@typescript-eslint/no-explicit-any": "warn", "@typescript-eslint/ban-types": "error"}}


def setup_npm_tools():
    if not (TOOLS / "node_modules" / ".bin" / "tsc").exists():
        TOOLS.mkdir(parents=True, exist_ok=True)
        sh(["npm", "init", "-y"], TOOLS)
        sh(["npm", "install", "--no-audit", "--no-fund", "typescript@5.4.5", "eslint@8.57.0",
            "@typescript-eslint/parser@7.18.0", "@typescript-eslint/eslint-plugin@7.18.0"], TOOLS, 600)
    (TOOLS / "eslintrc.json").write_text(json.dumps(ESLINTRC, indent=1))
    (TOOLS / "tseslintrc.json").write_text(json.dumps(TSESLINTRC, indent=1))


def npm_unpack(name, ver):
    """Fresh tree from the packed tarball on every run (npm test scripts may rewrite the tree)."""
    d = CACHE / "npm" / f"{name}-{ver}"
    d.mkdir(parents=True, exist_ok=True)
    if not glob.glob(str(d / "*.tgz")):
        sh(["npm", "pack", f"{name}@{ver}", "--pack-destination", str(d)], d)
    shutil.rmtree(d / "package", ignore_errors=True)
    with tarfile.open(glob.glob(str(d / "*.tgz"))[0]) as t:
        t.extractall(d, filter="data")
    return d / "package"


def npm_recipe(name, ver, old):
    setup_npm_tools()
    pkg, old_pkg = npm_unpack(name, ver), npm_unpack(name, old)
    meta = json_file(pkg / "package.json")
    vers = f"node {version(['node', '--version'])}, npm {version(['npm', '--version'])}, " \
           f"typescript {version(['tsc', '--version'])}, eslint {version(['eslint', '--version'])}, {name} {ver}"
    t = Tree(f"npm:{name}", pkg, str(meta.get("license", "unknown")), vers)
    src = sorted(p for p in pkg.rglob("*") if p.suffix in (".js", ".mjs", ".cjs", ".ts") and p.is_file())
    exports = sorted(set(re.findall(r"export (?:declare )?(?:function|const|class) (\w{4,})",
                                    "\n".join(p.read_text(errors="replace") for p in src[:300]))))
    t.browse({".js", ".mjs", ".cjs", ".ts"}, exports[:4] + ["require(", "throw new", "return "])

    def rel(p: Path) -> str:
        return str(p.relative_to(pkg))

    js = [rel(p) for p in src if p.suffix in (".js", ".mjs", ".cjs")]
    dts = [rel(p) for p in src if p.name.endswith(".d.ts")]
    ts = [rel(p) for p in src if p.suffix == ".ts" and not p.name.endswith(".d.ts")]
    main = meta.get("main") or (js[0] if js else None)
    # Type checks: strict settings plus an old lib/target so real errors surface.
    if ts:
        t.run("type_check", ["tsc", "--noEmit", "--pretty", "false", "--strict", "--target", "es5", "--lib", "es5",
                             "--moduleResolution", "node", *ts[:40]])
        t.run("type_check", ["tsc", "--noEmit", "--pretty", "false", "--strict", "--exactOptionalPropertyTypes",
                             "--noUncheckedIndexedAccess", "--target", "es2022", "--moduleResolution", "node", *ts[:40]])
    if dts:
        t.run("type_check", ["tsc", "--noEmit", "--pretty", "false", "--strict", "--lib", "es5", *dts[:20]])
    if main and (pkg / main).is_file():
        t.run("type_check", ["tsc", "--noEmit", "--pretty", "false", "--allowJs", "--checkJs", "--strict",
                             "--target", "es2015", "--moduleResolution", "node", main])
        t.run("build_output", ["tsc", "--pretty", "false", "--allowJs", "--declaration", "--emitDeclarationOnly",
                               "--listEmittedFiles", "--outDir", "../tsc-out", main])
        t.run("build_output", ["tsc", "--pretty", "false", "--allowJs", "--noEmit", "--listFiles", "--extendedDiagnostics", main])
        t.run("build_output", ["tsc", "--pretty", "false", "--allowJs", "--noEmit", "--traceResolution", main])
    # Lint: per top-level folder (a whole-package run can exceed the cap) and the largest file.
    cfg, tscfg = str(TOOLS / "eslintrc.json"), str(TOOLS / "tseslintrc.json")
    lint = ["eslint", "--no-eslintrc", "--resolve-plugins-relative-to", str(TOOLS), "--no-color"]
    tops = sorted({Path(j).parts[0] for j in js})[:5]
    for top in tops:
        t.run("lint", [*lint, "-c", cfg, "--ext", ".js,.mjs,.cjs", top])
    if js:
        big = max(js, key=lambda j: (pkg / j).stat().st_size)
        t.run("lint", [*lint, "-c", cfg, "--format", "unix", big])
        t.run("lint", [*lint, "-c", cfg, "--format", "compact", "--rule", "max-len: [warn, 100]", big])
    if ts or dts:
        t.run("lint", [*lint, "-c", tscfg, *(ts or dts)[:30]])
    # npm install: a missing version (ETARGET), a real install with its warnings, npm ls.
    inst = CACHE / "npm-install" / name
    shutil.rmtree(inst, ignore_errors=True)
    inst.mkdir(parents=True)
    sh(["npm", "init", "-y"], inst)
    t.root = inst
    t.run("build_output", ["npm", "install", "--no-color", "--no-audit", "--no-fund", f"{name}@99.99.99"], timeout=180)
    t.run("build_output", ["npm", "install", "--no-color", "--no-audit", "--no-fund", "--loglevel", "verbose", f"{name}@{ver}"], timeout=180)
    t.run("ls_find", ["npm", "ls", "--all", "--long"])
    # git diff between two real published versions.
    t.root = pkg.parent.parent
    a, b = f"{name}-{old}/package", f"{name}-{ver}/package"
    t.run("git_diff", ["git", "--no-pager", "diff", "--no-index", "--stat=120", a, b], cwd=".")
    t.run("git_diff", ["git", "--no-pager", "diff", "--no-index", f"{a}/package.json", f"{b}/package.json"])
    common = [p.relative_to(old_pkg) for p in old_pkg.rglob("*") if p.is_file() and (pkg / p.relative_to(old_pkg)).is_file()]
    changed = [c for c in sorted(common) if c.suffix in (".js", ".ts", ".md") and (old_pkg / c).read_bytes() != (pkg / c).read_bytes()]
    for c in changed[:3]:
        t.run("git_diff", ["git", "--no-pager", "diff", "--no-index", f"{a}/{c}", f"{b}/{c}"])
    t.run("git_diff", ["git", "--no-pager", "diff", "--no-index", a, b])
    t.root = pkg  # last: test scripts may rebuild or delete parts of the tree
    if meta.get("scripts", {}).get("test"):
        t.run("test_output", ["npm", "test", "--no-color"], timeout=180)
    for r in t.rows:
        if r["family"] == "git_diff":
            r["cwd"] = "parent folder holding both unpacked versions (npm pack + tar xzf)"
    return t.rows


# ------------------------------------------------------------------------ C
C_SDISTS = [("Brotli", "1.1.0", ["BrotliEncoderCompress", "BROTLI_BOOL", "malloc(", "static "]),
            ("lz4", "4.4.5", ["LZ4_compress_default", "LZ4_FORCE_INLINE", "memcpy(", "return "]),
            ("zstandard", "0.25.0", ["ZSTD_compressStream2", "ZSTD_isError", "assert(", "size_t"]),
            ("regex", "2024.11.6", ["RE_STATUS_USED", "Py_ssize_t", "re_alloc(", "switch ("])]


def pypi_sdist(name, ver):
    d = CACHE / "sdist"
    d.mkdir(parents=True, exist_ok=True)
    hits = [p for p in d.iterdir() if p.name.lower().startswith(f"{name.lower()}-{ver}") and p.is_dir()]
    if not hits:
        code, out = sh(["pip", "download", "--no-deps", "--no-binary", name, f"{name}=={ver}", "-d", str(d)], d, 300)
        tgz = [p for p in d.glob("*.tar.gz") if p.name.lower().startswith(f"{name.lower()}-{ver}")][0]
        with tarfile.open(tgz) as t:
            t.extractall(d, filter="data")
        hits = [p for p in d.iterdir() if p.name.lower().startswith(f"{name.lower()}-{ver}") and p.is_dir()]
    return hits[0]


def pkg_info_licence(root):
    text = (root / "PKG-INFO").read_text(errors="replace")
    m = re.search(r"^License(?:-Expression)?: (.+)$", text, re.M)
    if m and len(m.group(1)) < 80:
        return m.group(1).strip()
    m = re.search(r"Classifier: License :: (.+)$", text, re.M)
    return m.group(1).strip() if m else "see LICENSE file"


def c_recipe(name, ver, symbols):
    root = pypi_sdist(name, ver)
    vers = f"{version(['gcc', '--version'])}, {version(['pip', '--version']).split(' from')[0]}, {name} {ver} (PyPI sdist)"
    t = Tree(f"c:{name.lower()}", root, pkg_info_licence(root), vers)
    files, _ = t.browse({".c", ".h"}, symbols, n_reads=8)
    t.run("grep", ["grep", "-rn", "--include=*.c", "#include", "."])
    # The tree's header folders plus CPython's, which the extension-module sources include.
    incs = sorted({f"-I{p.parent.relative_to(root)}" for p in files if p.suffix == ".h"}) + [f"-I{sysconfig.get_paths()['include']}"]
    by_dir = {}
    for p in files:
        if p.suffix == ".c":
            by_dir.setdefault(str(p.parent.relative_to(root)), []).append(str(p.relative_to(root)))
    for d, cs in sorted(by_dir.items()):
        cs = cs[:25]
        # Same files under several real warning sets: default build, strict C89, conversions, -Werror.
        t.run("build_output", ["gcc", "-Wall", "-Wextra", "-O2", "-c", *incs, *cs], timeout=240)
        t.run("build_output", ["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-std=c89", *incs, *cs], timeout=240)
        t.run("build_output", ["gcc", "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Wconversion", "-Wshadow", *incs, *cs], timeout=240)
        t.run("build_output", ["gcc", "-fsyntax-only", "-Werror", "-Wall", "-Wextra", "-Wcast-qual", "-Wundef", *incs, *cs], timeout=240)
    # Building the Python extension compiles the whole library (long, verbose log).
    t.run("pip_install", ["pip", "wheel", "--no-deps", "-v", "-w", "../wheels", "."], timeout=400)
    return t.rows


# --------------------------------------------------------------------- Rust
# crate -> Debian packages of its dev-dependencies (needed before cargo can resolve the crate at all)
RUST = {"semver": [], "memchr": ["quickcheck"], "smallvec": ["bincode"], "either": ["serde-json"],
        "hex": ["criterion", "pretty-assertions"], "fnv": [], "bitflags": ["rustversion", "trybuild", "serde-json"]}
CARGO_CFG = '[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "/usr/share/cargo/registry"\n'


def rust_recipe(name):
    debs = [f"librust-{d}-dev" for d in [name, *RUST[name]]]
    sh(["apt-get", "install", "-y", "--no-install-recommends", *debs], ROOT, 600)
    src = sorted(glob.glob(f"/usr/share/cargo/registry/{name}-[0-9]*"))[-1]
    root = CACHE / "rust" / Path(src).name
    if not root.exists():
        shutil.copytree(src, root)
        (root / ".cargo").mkdir(exist_ok=True)
        (root / ".cargo" / "config.toml").write_text(CARGO_CFG)  # resolve deps from Debian's registry, offline
    lic = re.search(r'^license\s*=\s*"(.+)"', (root / "Cargo.toml").read_text(), re.M)
    t = Tree(f"crate:{name}", root, lic.group(1) if lic else "unknown",
             f"{version(['rustc', '--version'])}, {version(['cargo', '--version'])}, {Path(src).name} (Debian librust-{name}-dev)")
    t.run("build_output", ["cargo", "build", "--offline", "-v"], timeout=300)
    t.run("build_output", ["cargo", "build", "--offline", "--release", "--all-features"], timeout=300)
    t.run("test_output", ["cargo", "test", "--offline"], timeout=300)
    t.run("test_output", ["cargo", "test", "--offline", "--lib", "--", "--test-threads=1"], timeout=300)
    t.run("lint", ["cargo", "clippy", "--offline", "--", "-W", "clippy::pedantic"], timeout=300)
    t.run("lint", ["cargo", "clippy", "--offline", "--all-targets", "--", "-W", "clippy::nursery", "-W", "clippy::pedantic"], timeout=300)
    t.run("build_output", ["cargo", "doc", "--offline", "--no-deps"], timeout=300)
    t.run("ls_find", ["cargo", "tree", "--offline", "-e", "all"])
    t.browse({".rs"}, ["pub fn", "unsafe", "impl<", "fn "], n_reads=4)
    return t.rows


# --------------------------------------------------------------------- Java
def java_recipe(name, ver):
    root = pypi_sdist(name, ver)  # PyPI sdists of Java/Python bridges carry the Java sources
    vers = f"{version(['javac', '-version'])}, {version(['mvn', '-v'])}, {name} {ver} (PyPI sdist)"
    lic = {"jep": "zlib/libpng (pom.xml)"}.get(name.lower()) or pkg_info_licence(root)
    t = Tree(f"java:{name.lower()}", root, lic, vers)
    jfiles = sorted(str(p.relative_to(root)) for p in root.rglob("*.java"))
    main = [f for f in jfiles if "/test" not in f and "project/" not in f]
    tests = [f for f in jfiles if f not in main]
    t.run("build_output", ["javac", "-Xlint:all", "-d", "build/classes", *main])
    t.run("build_output", ["javac", "--release", "8", "-Xlint:all", "-Xmaxwarns", "2000", "-d", "build/classes8", *main])
    t.run("build_output", ["javac", "-Werror", "-Xlint:all,-serial", "-Xdiags:verbose", "-d", "build/werror", *main])
    if tests:
        t.run("build_output", ["javac", "-Xlint:all", "-cp", "build/classes", "-d", "build/test-classes", *tests])
    if (root / "pom.xml").exists():
        mvn = ["mvn", "-o", "-B", "-Dstyle.color=never"]
        t.run("build_output", [*mvn, "compile"], timeout=240)  # default plugin versions: offline resolution
        goals = ["org.apache.maven.plugins:maven-resources-plugin:3.3.1:resources",
                 "org.apache.maven.plugins:maven-compiler-plugin:3.13.0:compile"]
        t.run("build_output", [*mvn, *goals, "-Dmaven.compiler.showWarnings=true"], timeout=240)
        t.run("build_output", [*mvn, "-X", *goals], timeout=240)
        t.run("test_output", [*mvn, *goals, "org.apache.maven.plugins:maven-compiler-plugin:3.13.0:testCompile",
                              "org.apache.maven.plugins:maven-surefire-plugin:3.2.5:test"], timeout=300)
    if (root / "CMakeLists.txt").exists():
        t.run("build_output", ["cmake", "-S", ".", "-B", "build/cmake"], timeout=240)
        t.run("build_output", ["make", "-C", "build/cmake", "-k", "-j2"], timeout=400)
    t.browse({".java"}, ["public static", "synchronized", "throws", "return "], n_reads=6)
    return t.rows


# ---------------------------------------------------------------------- main
RECIPES = {**{f"npm-{n}": (npm_recipe, (n, v, o)) for n, v, o in NPM},
           **{f"c-{n}": (c_recipe, (n, v, s)) for n, v, s in C_SDISTS},
           **{f"rust-{n}": (rust_recipe, (n,)) for n in RUST},
           "java-jep": (java_recipe, ("jep", "4.3.2")), "java-jpype1": (java_recipe, ("JPype1", "1.7.1")),
           **{f"logs-{s}": (logs_recipe, (s,)) for s in ("postgresql", "nginx", "redis-server")},
           "logs-ray": (ray_recipe, ())}


def write_atomic(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def collect_ecosystems(out: str | Path = "runs/handlabel/pool/ecosystems.jsonl", only: list[str] | None = None,
                       redo: bool = False) -> tuple[int, Path]:
    """Run the recipes (``only`` these; cached ones again with ``redo``) and write every cached recipe's rows
    to ``out`` (relative: under the checkout): jobs/collect_pool.py ecosystems. Returns (rows, path)."""
    names = only or list(RECIPES)
    unknown = [name for name in names if name not in RECIPES]
    if unknown:
        from squeez_ray.errors import JobError

        raise JobError(f"unknown recipe(s) {', '.join(unknown)}; choose from: {', '.join(RECIPES)}")
    for name in names:
        cached = CACHE / "rows" / f"{name}.jsonl"
        if cached.exists() and not redo:
            continue
        t0 = time.time()
        fn, args = RECIPES[name]
        try:
            rows = fn(*args)
        except Exception as e:  # noqa: BLE001 - one broken recipe must not lose the others
            print(f"[{name}] FAILED: {e!r}", flush=True)
            continue
        write_atomic(cached, rows)
        print(f"[{name}] {len(rows)} rows in {time.time() - t0:.0f}s", flush=True)
    seen, rows = set(), []
    for name in RECIPES:  # concatenate every cached recipe, in recipe order
        cached = CACHE / "rows" / f"{name}.jsonl"
        # Split on "\n" only: outputs may hold form feeds or U+2028, which str.splitlines() would split on.
        for line in (cached.read_text(encoding="utf-8").split("\n") if cached.exists() else []):
            if not line:
                continue
            r = json.loads(line)
            if r["output_id"] not in seen:
                seen.add(r["output_id"])
                rows.append(r)
    path = Path(out) if Path(out).is_absolute() else ROOT / out
    write_atomic(path, rows)
    return len(rows), path
