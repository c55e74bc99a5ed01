#!/bin/sh
# The image's entrypoint, started by tini (PID 1, without -g: see the Dockerfile).
#
#   (no arguments) | worker [--processes N --threads N] | --processes N ...   -> calsync worker
#   exporter | migrate | reconcile [--enqueue] | any other calsync command   -> calsync <command>
#   /absolute/path [args]                                                     -> runs it (e.g. /bin/sh)
#
# Before a worker starts, the Prometheus multiprocess directory and the heartbeat directory are emptied:
# they are emptyDirs, which survive container restarts, and files of dead processes would inflate gauges,
# carry counters over and leave heartbeat files for the liveness probe to judge. Dramatiq never clears
# them. Every process is exec'd, so the Dramatiq main process is tini's only child and alone receives
# SIGTERM, then drains its worker processes.
set -eu

data_dir=${CALSYNC_DATA_DIR:-${XDG_DATA_HOME:-${HOME:-/tmp}/.local/share}/calsync}
metrics_dir=${CALSYNC_METRICS_DIR:-$data_dir/prometheus}
heartbeat_dir=${CALSYNC_HEARTBEAT_DIR:-$data_dir/heartbeats}

# Deletes only what calsync writes there (prometheus_client's *.db, the workers' *.heartbeat), so a
# directory set by mistake to a shared path such as /tmp loses nothing else.
empty_dir() {
    mkdir -p "$1"
    find "$1" -mindepth 1 -maxdepth 1 -type f -name "$2" -exec rm -f {} +
}

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
    set -- worker "$@"
fi

case $1 in
    worker)
        empty_dir "$metrics_dir" '*.db'
        empty_dir "$heartbeat_dir" '*.heartbeat'
        exec calsync "$@"
        ;;
    /*)
        exec "$@"
        ;;
    *)
        exec calsync "$@"
        ;;
esac
