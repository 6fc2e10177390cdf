# Shared by scripts/* and peers/install: installing the external tools archzoo uses, from
# Debian's packages.

# apt_install PKG... — installs the packages as root with apt-get, non-interactively;
# otherwise says exactly what to install and fails.
apt_install() {
    [ $# -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing $* with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq </dev/null >/dev/null \
            && apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null \
            || { echo "error: apt-get install $* failed" >&2; return 1; }
    else
        echo "error: missing $*; install them with: sudo apt-get install $*" >&2
        return 1
    fi
}

# need_packages PKG:CMD ... — installs each package whose command is missing.
need_packages() {
    local missing=() pair pkg cmd
    for pair in "$@"; do
        pkg=${pair%%:*}; cmd=${pair##*:}
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
    done
    apt_install "${missing[@]}"
}

# need_debs PKG... — installs each package dpkg does not know as installed (for packages
# without a command of their own, such as a PHP extension or python3-venv).
need_debs() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    apt_install "${missing[@]}"
}

# need_oha — installs oha (the open-loop load generator of bench --rate and --slo) into
# target/tools/bin with cargo, at the version the harness's parser was checked against,
# unless it is there or on the PATH (about 6 minutes to build on 2 cores, once).
OHA_VERSION=1.16.0
need_oha() {
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/tools"
    if command -v oha >/dev/null 2>&1 || [ -x "$root/bin/oha" ]; then
        return 0
    fi
    echo "installing oha $OHA_VERSION with cargo install (once; a few minutes)" >&2
    cargo install --quiet --locked --version "$OHA_VERSION" --root "$root" oha </dev/null \
        || { echo "error: cargo install oha $OHA_VERSION failed" >&2; return 1; }
}
