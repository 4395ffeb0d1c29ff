# Shared set-up of the proxy benchmarks (run.sh, ab.sh, syscalls.sh,
# instructions.sh), sourced by each: a scratch directory removed on exit
# with the processes started into it, the nginx backend, nginx and HAProxy
# as reverse proxies with one worker each, and `vantage proxy`
# configurations without and with SBAC.

# bench_scratch NAME: $work, a fresh directory; $pids, the processes to
# stop. Both are cleaned up when the script exits, however it exits.
bench_scratch() {
  work=$(mktemp -d "/tmp/vantage-proxy-$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# write_backend DIR ADDRESS BODY: DIR/nginx.conf, one nginx worker
# answering every request with BODY (nginx reads `\n` in it as a newline).
write_backend() {
  mkdir -p "$1"
  cat > "$1/nginx.conf" <<CONF
worker_processes 1;
error_log $1/error.log;
pid $1/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen $2; location / { return 200 "$3"; } }
}
CONF
}

# write_nginx_proxy DIR LISTEN BACKEND [DIRECTIVE]: DIR/nginx.conf, nginx
# as a reverse proxy with one worker and upstream keep-alive; DIRECTIVE
# (e.g. `master_process off;`) is added at the top.
write_nginx_proxy() {
  mkdir -p "$1"
  cat > "$1/nginx.conf" <<CONF
worker_processes 1;
${4:-}
error_log $1/error.log;
pid $1/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server $3; keepalive 64; }
  server {
    listen $2;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
}

# write_haproxy FILE LISTEN BACKEND: HAProxy with one thread, connections
# to the backend reused.
write_haproxy() {
  cat > "$1" <<CONF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend in
  bind $2
  default_backend out
backend out
  server b1 $3
CONF
}

# write_vantage FILE LISTEN BACKEND [KEY]: `vantage proxy` with one worker
# and the occupancy input; with KEY (hex), SBAC's hybrid strategy signing
# session cookies with it.
write_vantage() {
  cat > "$1" <<CONF
listen = "$2"
upstreams = ["$3"]
workers = 1
[utilization]
concurrency = 1000
CONF
  if [ -n "${4:-}" ]; then
    printf '[sbac]\nstrategy = "hybrid"\nkeys = ["%s"]\n' "$4" >> "$1"
  fi
}

# session_key: a fresh random key for write_vantage.
session_key() {
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'
}

# wait_for ADDRESS: until something answers HTTP there (at most 10 s).
wait_for() {
  for _ in $(seq 100); do curl -fs "http://$1/" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "nothing answers on $1" >&2
  exit 1
}

# cpu_seconds PID: the process's utime + stime so far, seconds.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
