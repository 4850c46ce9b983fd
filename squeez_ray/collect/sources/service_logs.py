"""Hand-label recipes over service logs: PostgreSQL, nginx and Redis started and driven on this
machine, and a small Ray program whose session logs are read back."""
from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from squeez_ray.collect.sources.recipe_tree import CACHE, ROOT, Tree, sh, version


def logs_recipe(service):
    sh(["apt-get", "install", "-y", "--no-install-recommends", service], ROOT, 600)
    d = CACHE / "logs" / service
    d.mkdir(parents=True, exist_ok=True)
    lic = {"postgresql": "PostgreSQL", "nginx": "BSD-2-Clause", "redis-server": "BSD-3-Clause"}[service]
    t = Tree(f"logs:{service.split('-')[0]}", d, lic, f"{version(['dpkg-query', '-W', service])} (Debian)")

    def drive(*argv: str, timeout: float = 120) -> object:  # traffic, not recorded
        return sh(list(argv), d, timeout)

    if service == "postgresql":
        conf = "/etc/postgresql/15/main/conf.d/handlabel.conf"
        drive("pg_ctlcluster", "15", "main", "stop")
        Path("/var/log/postgresql/postgresql-15-main.log").write_text("")
        Path(conf).write_text("log_connections = on\nlog_disconnections = on\nlog_statement = 'all'\n"
                              "log_min_duration_statement = 0\nlog_line_prefix = '%m [%p] %q%u@%d '\n")
        drive("pg_ctlcluster", "15", "main", "start")
        for q in ["CREATE DATABASE shop", "SELECT * FROM missing_table", "SELECT 1/0", "CREATE ROLE app LOGIN PASSWORD 'pw'",
                  "SELEC broken syntax", "DROP TABLE nope", "ALTER SYSTEM SET work_mem = 'lots'"]:
            drive("su", "postgres", "-c", f"psql -c {shlex.quote(q)}")
        drive("su", "postgres", "-c", "pgbench -i -s 2 shop", timeout=300)
        drive("su", "postgres", "-c", "pgbench -c 4 -t 100 shop", timeout=300)
        drive("env", "PGPASSWORD=wrong", "psql", "-h", "127.0.0.1", "-U", "app", "-d", "postgres", "-c", "select 1")
        drive("env", "PGPASSWORD=x", "psql", "-h", "127.0.0.1", "-U", "nosuchuser", "-d", "nodb", "-c", "select 1")
        Path(conf).write_text(Path(conf).read_text() + "shared_buffers = 'plenty'\nbogus_setting = 1\n")
        t.run("logs", ["pg_ctlcluster", "15", "main", "restart"])  # fails on the bad config
        Path(conf).write_text("log_connections = on\n")
        drive("pg_ctlcluster", "15", "main", "start")
        log = "/var/log/postgresql/postgresql-15-main.log"
    elif service == "nginx":
        drive("nginx", "-s", "stop")
        for f in ("access.log", "error.log"):
            Path(f"/var/log/nginx/{f}").write_text("")
        drive("nginx")
        for i in range(40):  # bounded loopback traffic: pages, 404s, bad methods, path tricks
            for path in ["/", "/index.nginx-debian.html", f"/missing-{i}", "/../etc/passwd", "/.git/config", f"/api/v1/items?id={i}"]:
                drive("curl", "-s", "--max-time", "5", "-o", "/dev/null", "-X", ["GET", "POST", "DELETE", "PUT"][i % 4], f"http://127.0.0.1{path}")
        bad = "/etc/nginx/conf.d/handlabel.conf"
        Path(bad).write_text("server { listen 8089; location / { proxy_pass http://upstream_missing; } unknown_directive on; }\n")
        t.run("logs", ["nginx", "-t"])
        t.run("logs", ["nginx", "-s", "reload"])
        os.remove(bad)
        drive("nginx", "-s", "reload")
        time.sleep(1)
        log = "/var/log/nginx/access.log"
        t.run("logs", ["cat", "-n", "/var/log/nginx/error.log"])
    else:
        drive("redis-cli", "shutdown", "nosave")
        log = str(d / "redis.log")
        Path(log).write_text("")
        drive("redis-server", "--daemonize", "yes", "--logfile", log, "--loglevel", "verbose", "--dir", str(d), "--port", "6399")
        time.sleep(1)
        for cmd in [["SET", "k", "v"], ["LPUSH", "k", "x"], ["AUTH", "wrong"], ["CONFIG", "SET", "maxmemory", "lots"],
                    ["BGSAVE"], ["DEBUG", "SLEEP", "0"], ["NOSUCHCMD"], ["CLIENT", "KILL", "ID", "99999"]]:
            drive("redis-cli", "-p", "6399", *cmd)
        drive("redis-benchmark", "-p", "6399", "-n", "2000", "-c", "20", "-q", timeout=300)
        drive("redis-cli", "-p", "6399", "shutdown")
        time.sleep(1)
        t.run("logs", ["redis-server", "--port", "6399", "--maxmemory-policy", "sometimes", "--logfile", log])
        drive("redis-server", "--daemonize", "yes", "--logfile", log, "--loglevel", "verbose", "--dir", str(d), "--port", "6399")
        time.sleep(2)
        drive("redis-cli", "-p", "6399", "shutdown")
    t.root = Path("/")
    t.run("logs", ["cat", "-n", log])
    t.run("logs", ["tail", "-n", "200", log])
    n = sum(1 for _ in open(log, "rb"))
    for start in range(1, min(n, 6000), 1200) if n > 1200 else []:  # page through a big log
        t.run("logs", ["sed", "-n", f"{start},{start + 1199}p", log])
    t.run("logs", ["grep", "-n", "-i", "error\\|fatal\\|warn\\| 404 ", log])
    for pat in ("ERROR", "FATAL", "LOG:  statement", "connection", " 404 ", "POST", "Accepted", "DB saved"):
        t.run("logs", ["grep", "-n", "-B", "2", "-A", "2", pat, log])
    for r in t.rows:
        r["cwd"] = "/ (system log files of the service started by this recipe)"
    return t.rows


RAY_SCRIPT = """import ray
ray.init(num_cpus=1, _temp_dir='/tmp/handlabel_ray', include_dashboard=False)
@ray.remote
def div(a, b):
    return a / b
@ray.remote
class Counter:
    def __init__(self): self.n = 0
    def bump(self): self.n += 1; return self.n
c = Counter.remote()
print(ray.get([c.bump.remote() for _ in range(5)]))
print(ray.get([div.remote(i, 2) for i in range(4)]))
ray.get(div.remote(1, 0))
"""


def ray_recipe():
    py = ROOT / ".venv" / "bin" / "python"
    if not py.exists():
        return []
    d = CACHE / "ray"
    d.mkdir(parents=True, exist_ok=True)
    t = Tree("logs:ray", d, "Apache-2.0", f"{version([str(py), '-c', 'import ray; print(ray.__version__)'])} (ray)")
    t.run("python_traceback", [str(py), "-c", RAY_SCRIPT], timeout=300)
    logs = Path("/tmp/handlabel_ray/session_latest/logs")
    t.root = logs
    t.run("ls_find", ["ls", "-la"])
    for p in sorted(logs.iterdir()) if logs.exists() else []:
        if p.is_file() and p.suffix in (".out", ".err", ".log"):
            t.run("logs", ["cat", "-n", p.name])
    for r in t.rows:
        r["cwd"] = "/tmp/handlabel_ray/session_latest/logs" if r["family"] != "python_traceback" else "any"
    return t.rows
