#!/usr/bin/env bash
# The fresh-machine promise, proven: in a minimal Debian 12 root (debootstrap --variant=minbase)
# holding a clone of the commit under test, run as root
#   1. the README's two commands, exactly as its first sh block writes them (each one's time and
#      the number and installed size of the packages it added are printed), then
#   2. the commands of examples/README.md's sh blocks, in order, in one shell.
# Fails if any of them fails. Needs root (debootstrap, chroot, mounts) and the network to the
# machine's Debian mirror, which is read from its apt sources at run time.
#
# The bare root (nothing of the project's installed yet) is cached as a tarball in
# ${MLATUNE_ROOT_CACHE:-/var/cache/mlatune-ci}, keyed by suite, architecture and mirror; without
# it the root is made anew (one to three minutes). The root lives outside the clone (under
# ${TMPDIR:-/var/tmp}), so that nothing walking the clone meets its mounts. Environment:
# FRESH_ROOT_REV (default HEAD) picks the commit to clone; FRESH_ROOT_KEEP=1 leaves the root there
# for inspection.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
suite=bookworm
rev=$(git rev-parse --verify "${FRESH_ROOT_REV:-HEAD}^{commit}")
root=
cache=${MLATUNE_ROOT_CACHE:-/var/cache/mlatune-ci}

fail() {
  echo "fresh root: FAILED: $*" >&2
  exit 1
}
[[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, chroot and mounts)"
command -v debootstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
}

# The machine's Debian mirror for $suite: the first "deb" source, one-line or deb822 format, whose
# suite is exactly $suite and whose components include main.
debian_mirror() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    if [[ $f == *.sources ]]; then
      awk -v suite="$suite" '
        function flush() {
          if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") &&
              (" " comps " ") ~ / main /) { split(uris, u, " "); print u[1]; found = 1; exit }
          types = uris = suites = comps = ""
        }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
        /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
        /^Components:/ { sub(/^Components:[ \t]*/, ""); comps = $0 }
        END { if (!found) flush() }' "$f"
    else
      awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) != suite) next
        for (c = i + 2; c <= NF; c++) if ($c == "main") { print $i; exit }
      }' "$f"
    fi
  done | head -1
}

# Unmounts whatever is mounted under the root; the root is only ever removed after this, and then
# without crossing into another file system.
unmount_root() {
  local m
  for m in dev/pts dev proc sys; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount "$root/$m" || umount -l "$root/$m"; fi
  done
}
remove_root() {
  unmount_root
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    fail "something is still mounted under $root: not removing it"
  fi
  rm -rf --one-file-system "$root"
}
cleanup() {
  if [[ ${FRESH_ROOT_KEEP:-0} == 1 ]]; then
    unmount_root
    echo "fresh root: kept in $root"
  else
    remove_root
  fi
}

mirror=$(debian_mirror)
[[ -n $mirror ]] || fail "no Debian '$suite' mirror with component main in this machine's apt sources"
arch=$(dpkg --print-architecture)
key="$suite minbase $arch $mirror"
tarball=$cache/$suite-minbase-$arch.tar

root=$(mktemp -d "${TMPDIR:-/var/tmp}/mlatune-fresh-root.XXXXXX")
chmod 755 "$root"  # apt downloads as the unprivileged _apt user, who must reach /var
trap cleanup EXIT
start=$SECONDS
if [[ -f $tarball && -f $tarball.key && $(cat "$tarball.key") == "$key" ]]; then
  tar -C "$root" -xf "$tarball"
  echo "== bare root from the cache $tarball ($key; $((SECONDS - start)) s)"
else
  log=$(mktemp)
  debootstrap --variant=minbase --arch="$arch" "$suite" "$root" "$mirror" >"$log" 2>&1 ||
    { tail -20 "$log" >&2; fail "debootstrap $suite from $mirror"; }
  rm -f "$log"
  mkdir -p "$cache"
  tar -C "$root" -cf "$tarball.partial" . && echo "$key" >"$tarball.key.partial" &&
    mv "$tarball.partial" "$tarball" && mv "$tarball.key.partial" "$tarball.key"
  echo "== bare root made by debootstrap ($key; $((SECONDS - start)) s), cached in $tarball"
fi
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null || true

git clone -q --no-local "$repo" "$root/src/mlatune"
git -C "$root/src/mlatune" checkout -q --detach "$rev"
echo "== clone of $(git log -1 --format='%h %s' "$rev" | cut -c1-90) in the root"

# in_root COMMAND: runs COMMAND with bash in the clone, as root, with a login-like environment
# and nothing of this machine's.
in_root() {
  env -i HOME=/root LANG=C.UTF-8 TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$root" /bin/bash -c "cd /src/mlatune && $1"
}
packages_count_and_kib() {
  in_root "dpkg-query -W -f='\${db:Status-Abbrev} \${Installed-Size}\n' |
           awk '\$1 == \"ii\" {n++; kib += \$2} END {print n, kib}'"
}

# The first sh block of a markdown file, without its fences.
sh_block() {
  awk '/^```sh$/ {inside = 1; next} inside && /^```$/ {exit} inside {print}' "$1"
}
# Every sh block of a markdown file, in order (indented ones too), without their fences.
all_sh_blocks() {
  awk '/^ *```sh$/ {inside = 1; match($0, /^ */); indent = RLENGTH; next}
       inside && /^ *```$/ {inside = 0; next}
       inside {print substr($0, indent + 1)}' "$1"
}

readme_commands=$(sh_block "$root/src/mlatune/README.md")
[[ -n $readme_commands ]] || fail "README.md has no sh block"
while IFS= read -r command; do
  [[ -n ${command// /} ]] || continue
  read -r before_n before_kib <<<"$(packages_count_and_kib)"
  echo "== in the fresh root: $command"
  start=$SECONDS
  in_root "$command" || fail "README command failed in the fresh root: $command"
  read -r after_n after_kib <<<"$(packages_count_and_kib)"
  echo "== README command took $((SECONDS - start)) s and installed $((after_n - before_n))" \
       "packages ($(((after_kib - before_kib) / 1024)) MiB installed size): $command"
done <<<"$readme_commands"

example_commands=$(all_sh_blocks "$root/src/mlatune/examples/README.md")
[[ -n $example_commands ]] || fail "examples/README.md has no sh block"
echo "== in the fresh root, examples/README.md's commands:"
echo "$example_commands"
start=$SECONDS
in_root "set -euxo pipefail
$example_commands" || fail "a command of examples/README.md failed in the fresh root"
echo "== examples/README.md's commands took $((SECONDS - start)) s"
echo "fresh root: OK"
