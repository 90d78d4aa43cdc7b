#!/bin/sh
# Packs this machine's perf, its libraries and loader into
# build/perfkit.tar.xz for hosts without perf (tests/gpu/perf.sh). Perl and
# Python scripting are not used there: those two libraries (11 MB of the
# carry limit) are replaced by stubs defining just the symbols perf binds
# at load, functions as empty ones, data as zeroed bytes of the same size.
set -eu
P=$(command -v perf)
P=$(readlink -f "$P")
K=build/perfkit
rm -rf "$K" && mkdir -p "$K"
cp "$P" "$K/perf"
ldd "$P" | awk '$3 ~ /^\// {print $3} $1 ~ /^\/lib64/ {print $1}' | xargs -I{} cp -L {} "$K/"
python3 - "$P" "$K" <<'PY'
import subprocess, sys
perf, kit = sys.argv[1], sys.argv[2]
def dynsyms(path):
    out = subprocess.run(["readelf", "-W", "--dyn-syms", path],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].endswith(":"):
            yield f
wanted = {f[7].split("@")[0] for f in dynsyms(perf)}
for lib in ("libpython3.11.so.1.0", "libperl.so.5.36"):
    src = set()
    for f in dynsyms(f"{kit}/{lib}"):
        name = f[7].split("@")[0]
        if f[6] == "UND" or name not in wanted:
            continue
        size = max(int(f[2]) if f[2].isdigit() else 8, 8)
        if f[3] == "FUNC":
            src.add(f"void {name}(void) {{}}")
        elif f[3] == "TLS":
            src.add(f"__thread char {name}[{size}];")
        else:
            src.add(f"char {name}[{size}];")
    with open(f"{kit}/{lib}.c", "w") as c:
        c.write("\n".join(sorted(src)) + "\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-w", "-o", f"{kit}/{lib}",
                    f"-Wl,-soname,{lib}", f"{kit}/{lib}.c"], check=True)
PY
rm -f "$K"/*.c
"$K/ld-linux-x86-64.so.2" --library-path "$K" "$K/perf" --version
tar cf - -C build perfkit | xz -9 -T2 >build/perfkit.tar.xz
ls -l build/perfkit.tar.xz
