#!/usr/bin/env bash
# Print the path of a CPython X.Y interpreter: `scripts/find_python.sh 3.12`.
#
# pyenv's newest X.Y.* build first ($PYENV_ROOT, else ~/.pyenv): pyenv's shims on PATH refuse a version that is
# not the selected one. Then pythonX.Y on PATH, if it runs and is X.Y. Fails naming where it looked.
set -euo pipefail
version=${1:?usage: scripts/find_python.sh X.Y}
if [[ ! $version =~ ^3\.[0-9]+$ ]]; then
    echo "find_python.sh: '$version' is not a Python version such as 3.12" >&2
    exit 2
fi
is_version() {
    "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null
}
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
for candidate in $(ls -d "$pyenv_root"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V -r) \
    "$(command -v "python$version" || true)"; do
    if [[ -n $candidate ]] && is_version "$candidate"; then
        echo "$candidate"
        exit 0
    fi
done
echo "Python $version not found: no $pyenv_root/versions/$version.*/bin/python$version and no working" \
    "python$version on PATH. Install it (pyenv install $version, or the distribution's python$version" \
    "and python$version-venv packages)." >&2
exit 1
