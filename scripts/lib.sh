# Shared by scripts/*: installing the external tools archzoo uses, from Debian's packages.

# need_packages PKG:CMD ... — installs each package whose command is missing (as root, with
# apt-get, non-interactively); otherwise says exactly what to install and fails.
need_packages() {
    local missing=() pair pkg cmd
    for pair in "$@"; do
        pkg=${pair%%:*}; cmd=${pair##*:}
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${missing[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq </dev/null >/dev/null \
            && apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null \
            || { echo "error: apt-get install ${missing[*]} failed" >&2; return 1; }
    else
        echo "error: missing ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
        return 1
    fi
}
