#!/usr/bin/env bash
# Proof that the README's commands work on a pristine Debian 12 (run by .ci/run after scripts/test.sh; what it
# does, and how long it takes, is in the README's "Fresh-install check"). Needs root (debootstrap, mount,
# chroot) and Debian's package registry. The pristine root, taken right after debootstrap, is cached as a
# tarball keyed by suite, variant, include list, architecture and mirror. Everything after the preparation
# runs in a private mount and PID namespace (unshare), so when the check ends, fails or is killed every
# process in it dies and its mounts vanish; nothing is ever mounted on the host.
# Environment:
#   HNAS_FRESH_CACHE   directory of the cached pristine root (default ${XDG_CACHE_HOME:-/var/cache}/hnas-fresh-root)
#   HNAS_FRESH_REBUILD 1: debootstrap a new pristine root even when one is cached
#   HNAS_FRESH_MIRROR  Debian mirror URL (default: the host apt's Debian source of the suite)
#   HNAS_FRESH_TMPFS   size limit of the tmpfs holding the root (default 8g; it fills about 2 GiB of
#                      memory); 0: keep the root on disk in HNAS_FRESH_TMPDIR instead
#   HNAS_FRESH_TMPDIR  where the temporary directory is made (default /var/tmp)
#   HNAS_FRESH_LOGS    directory of the phase logs, kept after the run (default $HNAS_FRESH_CACHE/logs)
#   HNAS_FRESH_LOCK    a lock file held (flock) while the root sets up, builds and trains, so that
#                      builds on a shared machine take turns (default: none)
set -euo pipefail

suite=bookworm
variant=minbase
include=git,ca-certificates
config=configs/gigaword_tiny.json
steps=20
# Validation and checkpoints at steps 10 and 20, a small tokenizer and a short validation: seconds.
train_overrides="--set train.steps=$steps --set train.warmup_steps=5 --set train.log_every=5 \
--set validation.every=10 --set validation.max_batches=2 --set validation.decode_examples=20 \
--set checkpoint.every=10 --set tokenizer.vocab_size=1000 --set tokenizer.input_sentence_size=20000"

self=$(readlink -f "${BASH_SOURCE[0]}")
repo=$(dirname "$(dirname "$self")")
cache_dir=${HNAS_FRESH_CACHE:-${XDG_CACHE_HOME:-/var/cache}/hnas-fresh-root}
log_dir=${HNAS_FRESH_LOGS:-$cache_dir/logs}
tmp_parent=${HNAS_FRESH_TMPDIR:-/var/tmp}
tmpfs_size=${HNAS_FRESH_TMPFS:-8g}

say() { printf '[%s] fresh-install: %s\n' "$(date '+%F %T')" "$*"; }
fail() { printf '[%s] fresh-install: FAILED: %s\n' "$(date '+%F %T')" "$*" >&2; exit 1; }

# run_phase NAME COMMAND...: runs COMMAND with its output in $log_dir/NAME.log and a progress line
# every minute; records its wall time in $log_dir/phases; on failure shows the log's last lines.
child=
run_phase() {
  local name=$1 log="$log_dir/$1.log" start now last status=0
  shift
  start=$(date +%s) && last=$start
  say "$name: started (log: $log)"
  "$@" >"$log" 2>&1 </dev/null &
  child=$!
  while kill -0 "$child" 2>/dev/null; do
    sleep 2
    now=$(date +%s)
    if ((now - last >= 60)); then
      last=$now
      say "$name: running for $(((now - start) / 60)) min; last line: $(tail -n 1 "$log" | tr -d '\r' | cut -c 1-100)"
    fi
  done
  wait "$child" || status=$?
  child=
  now=$(date +%s)
  printf '%s\t%s\n' "$name" "$((now - start))" >>"$log_dir/phases"
  if ((status)); then
    say "$name: exit status $status after $((now - start)) s; the last lines of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
    fail "phase '$name' (full log: $log)"
  fi
  say "$name: done in $((now - start)) s"
}

# ---- inside the private namespace (the process that starts it is the namespace's init) -------------

# in_root SCRIPT: runs SCRIPT with bash in the chroot, as root, in a clean login-like environment.
in_root() {
  local env=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb
             PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  local var
  for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [ -n "${!var:-}" ]; then env+=("$var=${!var}"); fi
  done
  chroot "$root" /usr/bin/env -i "${env[@]}" /bin/bash -c "set -euo pipefail; $1"
}

# The pristine root in $root: unpacked from the cache, or made with debootstrap and cached.
make_root() {
  if [ -s "$tarball" ] && [ "${HNAS_FRESH_REBUILD:-0}" != 1 ]; then
    say "pristine root: cached ($tarball)"
    run_phase unpack tar --numeric-owner -xpzf "$tarball" -C "$root"
    return
  fi
  say "pristine root: none cached for [$key]; debootstrap"
  run_phase debootstrap debootstrap --variant="$variant" --include="$include" "$suite" "$root" "$mirror"
  run_phase cache tar --numeric-owner -cpzf "$tarball.partial" -C "$root" .
  mv -f -- "$tarball.partial" "$tarball"
  printf '%s\ncreated %s\n' "$key" "$(date '+%F %T')" >"${tarball%.tar.gz}.txt"
  # Roots cached under other keys are stale now.
  find "$cache_dir" -maxdepth 1 -name 'debian-*' ! -name "$(basename "${tarball%.tar.gz}").*" -delete
  say "pristine root cached: $tarball ($(du -h "$tarball" | cut -f 1))"
}

# The checkout's HEAD as a bundle, and what apt needs to reach the network as the host's does.
prepare_root() {
  local refs=(HEAD)
  if [ -n "$branch" ]; then refs+=("$branch"); fi
  git -C "$repo" bundle create -q "$root/root/hnas.bundle" "${refs[@]}"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  printf '%s\n' "$sources" >"$root/etc/apt/sources.list"
  rm -f "$root"/etc/apt/sources.list.d/*.list "$root"/etc/apt/sources.list.d/*.sources
  apt-config dump --format '%f "%v";%n' Acquire::http::Proxy Acquire::https::Proxy Acquire::ftp::Proxy \
    Acquire::Check-Valid-Until Acquire::Check-Date Acquire::Retries >"$root/etc/apt/apt.conf.d/99host-network"
  say "root prepared: HEAD $head (${branch:-detached}) as a git bundle; apt sources: $(tr '\n' ';' <<<"$sources")"
}

# /proc, a read-only /sys and a /dev of its own (tmpfs with the usual nodes, not the host's /dev).
mount_filesystems() {
  local node name major minor
  mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
  mount -t tmpfs -o nosuid,mode=0755,size=16m tmpfs "$root/dev"
  for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    IFS=: read -r name major minor <<<"$node"
    mknod -m 666 "$root/dev/$name" c "$major" "$minor"
  done
  mkdir -m 755 "$root/dev/pts"
  mkdir -m 1777 "$root/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
  mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
  for node in ptmx:pts/ptmx fd:/proc/self/fd stdin:/proc/self/fd/0 stdout:/proc/self/fd/1 stderr:/proc/self/fd/2; do
    ln -s "${node#*:}" "$root/dev/${node%%:*}"
  done
}

inside() {
  if [ "$tmpfs_size" != 0 ]; then mount -t tmpfs -o "size=$tmpfs_size,mode=0755" hnas-fresh-root "$root"; fi
  make_root
  prepare_root
  mount_filesystems

  if [ -n "${HNAS_FRESH_LOCK:-}" ]; then
    exec 9>>"$HNAS_FRESH_LOCK"
    if ! flock -n 9; then
      say "waiting for the lock $HNAS_FRESH_LOCK"
      flock 9
    fi
  fi

  # What a new user runs, in the chroot.
  run_phase clone in_root 'cd /root && git clone -q hnas.bundle hnas && git -C hnas log -1 --format="cloned %h %s"'
  run_phase setup in_root 'cd /root/hnas &&
    HNAS_BUILD_TARGET=hnas HNAS_CMAKE_ARGS="-DHNAS_BUILD_TESTS=OFF -DHNAS_BUILD_BENCH=OFF" scripts/setup.sh'
  run_phase train in_root "cd /root/hnas && build/hnas --version &&
    build/hnas train --config $config --out runs/fresh $train_overrides"

  local checkpoints="$root/root/hnas/runs/fresh/checkpoints" checkpoint
  checkpoint=$(find "$checkpoints" -maxdepth 1 -name '*.ckpt' -printf '%f\n' 2>/dev/null | sort | tail -n 1)
  [ -n "$checkpoint" ] || fail "the training run wrote no checkpoint into runs/fresh/checkpoints/"
  say "checkpoints: $(find "$checkpoints" -maxdepth 1 -name '*.ckpt' -printf '%f\n' | sort | tr '\n' ' ')(newest: $checkpoint)"
  run_phase inspect in_root "cd /root/hnas && build/hnas inspect runs/fresh/checkpoints/$checkpoint"
  grep -q "\"step\": $steps\b" "$log_dir/inspect.log" ||
    fail "build/hnas inspect did not report step $steps for $checkpoint (log: $log_dir/inspect.log)"
  grep -q '^parameters: ' "$log_dir/inspect.log" ||
    fail "build/hnas inspect printed no parameter count for $checkpoint (log: $log_dir/inspect.log)"
}

if [ "${1:-}" = --inside ]; then
  # The host part below hands over its findings in the environment.
  root=$HNAS_FRESH_ROOT mirror=$HNAS_FRESH_MIRROR sources=$HNAS_FRESH_SOURCES key=$HNAS_FRESH_KEY
  tarball=$HNAS_FRESH_TARBALL head=$HNAS_FRESH_HEAD branch=$HNAS_FRESH_BRANCH
  inside
  exit 0
fi

# ---- on the host ------------------------------------------------------------------------------------

# "ORIGIN URI SUITE COMPONENT" lines of the host apt's package indexes, deb822 or one-line sources alike.
host_debian_indexes() {
  # shellcheck disable=SC2016 # $(...) are apt's format fields, not shell expansions
  apt-get indextargets --format '$(ORIGIN) $(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' |
    awk '$1 == "Debian" { print $2, $3, $4 }' | sort -u
}

# Mount points at or below $1 as the host sees them (none: the check mounts only in its namespace).
mounts_below() {
  findmnt -rn -o TARGET | awk -v dir="$1" '$0 == dir || index($0, dir "/") == 1'
}

# remove_work: unmounts whatever is still mounted below $work (nothing should be), then removes it.
remove_work() {
  local target attempt start
  [ -n "$work" ] && [ -d "$work" ] || return 0
  for attempt in 1 2 3; do
    [ -n "$(mounts_below "$work")" ] || break
    say "unmounting what is still mounted below $work (attempt $attempt)"
    mounts_below "$work" | sort -r | while read -r target; do
      umount -R "$target" 2>/dev/null || umount -R -l "$target" || true
    done
    sleep 1
  done
  if [ -n "$(mounts_below "$work")" ]; then
    printf '[%s] fresh-install: NOT removing %s: still mounted below it:\n%s\n' \
      "$(date '+%F %T')" "$work" "$(mounts_below "$work")" >&2
    return 1
  fi
  start=$(date +%s)
  rm -rf --one-file-system -- "$work"
  say "removed the temporary directory $work in $(($(date +%s) - start)) s"
  work=
}

work=
tarball=
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    say "stopping the check (process $child)"
    kill -KILL "$child" 2>/dev/null || true  # unshare: every process of its namespace dies with it
    wait "$child" 2>/dev/null || true
  fi
  if [ -n "$tarball" ]; then rm -f -- "$tarball.partial"; fi
  remove_work || status=1
  exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted (SIGINT)"; exit 130' INT
trap 'say "terminated (SIGTERM)"; exit 143' TERM
trap 'say "hung up (SIGHUP)"; exit 129' HUP

started=$(date +%s)
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, mount, chroot)"
case $tmp_parent in *[[:space:]]*) fail "HNAS_FRESH_TMPDIR must not contain white space: '$tmp_parent'" ;; esac
mkdir -p "$cache_dir" "$log_dir" "$tmp_parent"
rm -f -- "$log_dir"/*.log "$log_dir/phases"
say "checking that the README's set-up and a training run work on a pristine Debian 12 ($suite, $variant)"

if ! command -v debootstrap >/dev/null || [ ! -s /usr/share/keyrings/debian-archive-keyring.gpg ]; then
  say "installing debootstrap and debian-archive-keyring on the host"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap debian-archive-keyring >/dev/null
fi

indexes=$(host_debian_indexes)
if [ -z "$indexes" ]; then
  apt-get update -qq  # the package lists name each source's origin; without them apt knows none
  indexes=$(host_debian_indexes)
fi
mirror=${HNAS_FRESH_MIRROR:-$(awk -v suite="$suite" '$2 == suite { print $1; exit }' <<<"$indexes")}
[ -n "$mirror" ] || fail "no Debian '$suite' source in the host's apt configuration; set HNAS_FRESH_MIRROR"
# The root's apt sources: the host's Debian ones of this suite (updates and security included).
sources=$(awk -v suite="$suite" '$2 == suite || index($2, suite "-") == 1 { c[$1 " " $2] = c[$1 " " $2] " " $3 }
  END { for (k in c) print "deb " k c[k] }' <<<"$indexes" | sort)
if [ -n "${HNAS_FRESH_MIRROR:-}" ] || [ -z "$sources" ]; then sources="deb $mirror $suite main"; fi

arch=$(dpkg --print-architecture)
key="suite=$suite variant=$variant include=$include arch=$arch mirror=$mirror"
tarball="$cache_dir/debian-$suite-$variant-$arch-$(printf '%s' "$key" | sha256sum | cut -c 1-16).tar.gz"
head=$(git -C "$repo" rev-parse --short HEAD)
branch=$(git -C "$repo" symbolic-ref -q --short HEAD || true)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  say "note: $repo has uncommitted changes; the check clones the committed HEAD $head without them"
fi
work=$(mktemp -d "$tmp_parent/hnas-fresh.XXXXXXXX")
mkdir "$work/root"
if [ "$tmpfs_size" != 0 ]; then where="a tmpfs on $work/root"; else where="$work/root"; fi
say "the root lives in $where, mounted only in a private namespace"

HNAS_FRESH_ROOT=$work/root HNAS_FRESH_MIRROR=$mirror HNAS_FRESH_SOURCES=$sources HNAS_FRESH_KEY=$key \
  HNAS_FRESH_TARBALL=$tarball HNAS_FRESH_HEAD=$head HNAS_FRESH_BRANCH=$branch \
  unshare --mount --pid --fork --kill-child --propagation private -- "$self" --inside </dev/null &
child=$!
status=0
wait "$child" || status=$?
child=
((status == 0)) || fail "the check in the pristine root failed (exit status $status; logs in $log_dir)"
remove_work || fail "could not remove $work"

say "the last lines of the training log ($log_dir/train.log):"
tail -n 8 "$log_dir/train.log" | sed 's/^/    /'
say "wall time per phase: $(awk -F '\t' '{ printf "%s%s %d s", sep, $1, $2; sep = ", " }' "$log_dir/phases")"
say "passed in $(($(date +%s) - started)) s: scripts/setup.sh, the build of hnas, a $steps-step run and" \
  "hnas inspect of its checkpoint work on a pristine Debian 12"
