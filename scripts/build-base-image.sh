#!/usr/bin/env bash
# Makes the Dockerfile's base image from Debian's packages, for machines that reach no image
# registry: mmdebstrap --variant=minbase (with the slim images' dpkg excludes), then podman import
# under the exact name of the Dockerfile's `ARG BASE_IMAGE=` default, e.g.
# docker.io/library/debian:12-slim. The name is read from the Dockerfile, so the pin is written
# once. Does nothing when an image of that name is already in the store.
#
# The pin is Debian's major release, as Docker Hub's `12-slim` tag is: Debian's mirror serves only
# the newest point release of a suite, so a point-release pin would stop every fresh machine's
# build the day Debian ships the next one. The point release built is in the image's message.
#
# Needs root (mmdebstrap's root mode) and Debian's mmdebstrap and podman. Environment:
# DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR (defaults: deb.debian.org), and podman's own
# (STORAGE_DRIVER, CONTAINERS_STORAGE_CONF...).
set -euo pipefail
cd "$(dirname "$0")/.."

image=$(sed -n 's/^ARG BASE_IMAGE=\([^[:space:]]*\).*/\1/p' Dockerfile | head -n 1)
if [ -z "$image" ]; then
    echo "build-base-image: no 'ARG BASE_IMAGE=<name>' line in Dockerfile" >&2
    exit 2
fi
if podman image exists "$image"; then
    echo "base image $image: already in the store"
    exit 0
fi

# docker.io/library/debian:12-slim -> 12 -> bookworm
tag=${image##*:}
release=${tag%-slim}
case "${release%%.*}" in
    12) suite=bookworm ;;
    13) suite=trixie ;;
    *)
        echo "build-base-image: cannot tell the Debian suite of $image (tag $tag)" >&2
        exit 2
        ;;
esac
for command in mmdebstrap podman; do
    if ! command -v "$command" >/dev/null; then
        echo "build-base-image: needs $command (apt-get install mmdebstrap podman)" >&2
        exit 2
    fi
done

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
work=$(mktemp -d /var/tmp/podwright-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "base image $image: mmdebstrap --variant=minbase $suite"
# merged-usr: /usr merged by symlinks beforehand, as debootstrap does, so that usr-is-merged
# stands in for usrmerge (which brings perl). The slim images' excludes stay in the image
# (dpkg.cfg.d), so the Dockerfile's apt-get installs leave out documentation and translations too.
mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/groff/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    "$suite" "$work/rootfs.tar" \
    "deb $mirror $suite main" \
    "deb $mirror $suite-updates main" \
    "deb $security $suite-security main" \
    >"$work/mmdebstrap.log" 2>&1 || {
    cat "$work/mmdebstrap.log" >&2
    echo "build-base-image: mmdebstrap failed (its output above)" >&2
    exit 1
}

built=$(tar -xOf "$work/rootfs.tar" ./etc/debian_version)
if [ "${built%%.*}" != "${release%%.*}" ]; then
    echo "build-base-image: Debian's mirror served $built for $suite, not a $release release" >&2
    exit 1
fi

podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "mmdebstrap --variant=minbase $suite ($built) from $mirror" \
    "$work/rootfs.tar" "$image" >/dev/null
echo "base image $image: imported ($(du -h "$work/rootfs.tar" | cut -f1) tarball)"
