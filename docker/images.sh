#!/usr/bin/env bash
# docker/images.sh: build fencecheck's container images locally, with no registry.
#
#   docker/images.sh kafka KAFKA_HOME   fencecheck/kafka:<version>: a Java runtime linked (jlink)
#                                       from this machine's JDK, the shared libraries it needs,
#                                       /bin/sh, and the broker jars in KAFKA_HOME/libs (make kafka)
#   docker/images.sh toxiproxy          fencecheck/toxiproxy:<version>: toxiproxy-server built from
#                                       the toxiproxy Go module this project pins (static binary)
#
# Each image is a rootfs tarball given to `docker import`. The tarball is cached in
# $FENCECHECK_IMAGE_CACHE (default ~/.cache/fencecheck/images) under a name that includes a hash
# of its inputs, so a second build only imports it, and the engine's own store (which
# docker/engine.sh deletes on stop) needs no persistence. DOCKER_HOST must name the engine.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${FENCECHECK_IMAGE_CACHE:-$HOME/.cache/fencecheck/images}"
JAVA_HOME_DIR="${FENCECHECK_IMAGE_JDK:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"

say() { echo "images: $*" >&2; }

# Temporary folders and files of a build, removed however the script ends (a failed step under
# set -e, Ctrl-C): a half-built rootfs holds a whole Java runtime.
TMP_PATHS=()
cleanup() { [ ${#TMP_PATHS[@]} = 0 ] || rm -rf "${TMP_PATHS[@]}"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# import TAR TAG CHANGES...: import a rootfs tarball as TAG.
import() {
  local tar=$1 tag=$2
  shift 2
  local changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  docker import "${changes[@]}" "$tar" "$tag" >/dev/null
  say "$tag imported from $tar"
}

# copy_libs ROOTFS FILES...: copy every shared library the files load (ldd), and the loader.
copy_libs() {
  local rootfs=$1
  shift
  local lib
  for lib in $(ldd "$@" 2>/dev/null | grep -o '/[^ ]*\.so[^ :]*' | sort -u); do
    case "$lib" in "$rootfs"/*) continue ;; esac
    [ -f "$lib" ] || continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}

# current TAG KEY: the engine holds TAG, built from the inputs whose hash is KEY.
current() {
  have_image "$1" && [ "$(docker image inspect -f '{{index .Config.Labels "fencecheck.inputs"}}' "$1")" = "$2" ]
}

# new_rootfs: an empty root filesystem with a /tmp, in $ROOTFS, removed when the script ends.
new_rootfs() {
  mkdir -p "$CACHE"
  ROOTFS=$(mktemp -d "$CACHE/.rootfs.XXXXXX")
  TMP_PATHS+=("$ROOTFS")
  mkdir -p "$ROOTFS/tmp"
  chmod 1777 "$ROOTFS/tmp"
}

# seal_rootfs TAR: $ROOTFS as the tarball TAR (<name>-<version>-<key>.tar), which appears whole
# or not at all; tarballs of the same name and version built from other inputs are deleted.
seal_rootfs() {
  local part old
  part=$(mktemp "$CACHE/.part.XXXXXX")
  TMP_PATHS+=("$part")
  tar -C "$ROOTFS" -cf "$part" .
  mv "$part" "$1"
  for old in "${1%-*}"-*.tar; do
    [ "$old" = "$1" ] || rm -f "$old"
  done
}

kafka() {
  local home=${1:?usage: images.sh kafka KAFKA_HOME}
  [ -d "$home/libs" ] || { say "no broker jars in $home/libs: run make kafka"; exit 1; }
  local version
  version=$(ls "$home/libs" | sed -n 's/^kafka_2\.13-\([0-9][0-9.]*\)\.jar$/\1/p' | head -1)
  [ -n "$version" ] || { say "no kafka_2.13-<version>.jar in $home/libs"; exit 1; }
  local tag="fencecheck/kafka:$version"
  local key
  key=$( (ls -l "$home/libs"; "$JAVA_HOME_DIR/bin/java" -version 2>&1; cat "$0") | sha256sum | cut -c1-12)
  local tar="$CACHE/kafka-$version-$key.tar"
  if current "$tag" "$key"; then
    say "$tag is up to date"
    return
  fi
  if [ ! -f "$tar" ]; then
    say "building $tag from $JAVA_HOME_DIR and $home/libs"
    new_rootfs
    # Every module of the JDK: Kafka and its dependencies reach into java.desktop
    # (java.beans), jdk.management and jdk.unsupported, and a missing module only shows
    # at run time.
    "$JAVA_HOME_DIR/bin/jlink" --add-modules ALL-MODULE-PATH --strip-debug --no-man-pages \
      --no-header-files --output "$ROOTFS/opt/java" 2> >(grep -v 'incubator modules' >&2)
    mkdir -p "$ROOTFS/opt/kafka" "$ROOTFS/bin" "$ROOTFS/etc" "$ROOTFS/fencecheck"
    cp -r "$home/libs" "$ROOTFS/opt/kafka/libs"
    cp -L /bin/sh "$ROOTFS/bin/sh"
    copy_libs "$ROOTFS" /bin/sh "$ROOTFS/opt/java/bin/java" $(find "$ROOTFS/opt/java/lib" -name '*.so')
    echo 'root:x:0:0:root:/root:/bin/sh' >"$ROOTFS/etc/passwd"
    seal_rootfs "$tar"
  fi
  import "$tar" "$tag" \
    "ENV PATH=/opt/java/bin:/bin" "ENV JAVA_HOME=/opt/java" "ENV KAFKA_HOME=/opt/kafka" \
    "LABEL fencecheck.inputs=$key" "LABEL org.apache.kafka.version=$version" \
    'CMD ["java", "-version"]'
}

toxiproxy() {
  local version
  version=$(cd "$ROOT" && go list -m -f '{{.Version}}' github.com/Shopify/toxiproxy/v2)
  version=${version#v}
  local tag="fencecheck/toxiproxy:$version"
  local key
  key=$( (go version; cat "$0") | sha256sum | cut -c1-12)
  local tar="$CACHE/toxiproxy-$version-$key.tar"
  if current "$tag" "$key"; then
    say "$tag is up to date"
    return
  fi
  if [ ! -f "$tar" ]; then
    say "building $tag from github.com/Shopify/toxiproxy/v2@v$version"
    new_rootfs
    (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' \
      -o "$ROOTFS/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server)
    seal_rootfs "$tar"
  fi
  import "$tar" "$tag" "LABEL fencecheck.inputs=$key" \
    'ENTRYPOINT ["/toxiproxy-server"]' 'CMD ["-host", "127.0.0.1", "-port", "8474"]'
}

case "${1:-}" in
  kafka) kafka "${2:-}" ;;
  toxiproxy) toxiproxy ;;
  *)
    echo "usage: $0 kafka KAFKA_HOME | toxiproxy" >&2
    exit 2
    ;;
esac
