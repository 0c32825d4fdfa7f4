#!/usr/bin/env bash
# On the real GPU host: the field notes' ABI break against the host's real torch. An extension
# compiled against the int line of c10::cuda::c10_cuda_check_implementation (torch exports the
# unsigned int line) must be named, with the overload torch does export, in seconds:
#   1. site.yml with the host-torch profile (tests/gpu/inventory.yml): release A, verified
#   2. site.yml again, the profile plus that extension through extension_globs: must fail at
#      verification, and A must stay current
#   3. the module alone on the host's venv, timed
# Writes into $OUT: abi-site.log, abi-module.json, abi-summary.txt.
set -uo pipefail
SUMMARY=${OUT:-/tmp/gpu-out}/abi-summary.txt
# shellcheck source=tests/gpu/lib.sh
. "$(dirname "$0")/lib.sh"
torch_dir=/opt/torch/.venv/lib/python3.12/site-packages/torch
ext=/tmp/abi/libsgl_kernel_like.so
mkdir -p /tmp/abi
g++ -shared -fPIC -o "$ext" tests/fixtures/abi/extension_mismatch.cpp || exit 1
{
  echo "torch $(/opt/torch/.venv/bin/python -c 'import torch; print(torch.__version__)')"
  echo "exported dynamic symbols of torch's libraries: $(nm -D -P --defined-only "$torch_dir"/lib/*.so* 2>/dev/null | wc -l)"
} >"$summary"

ansible-playbook -i tests/gpu/inventory.yml site.yml -l blackwell >"$out/abi-site.log" 2>&1
echo "site.yml host-torch: rc=$?" >>"$summary"
before=$(readlink /opt/ml-env)

start=$(date +%s.%N)
ansible-playbook -i tests/gpu/inventory.yml site.yml -l blackwell \
  -e '{"ml_env_profiles": {"host-torch": {"cuda_major": 13, "packages": {}, "system_site_packages": true,
       "imports": [{"name": "torch"}], "extension_globs": ["torch/_C*.so", "'"$ext"'"]}}}' >>"$out/abi-site.log" 2>&1
rc=$?
end=$(date +%s.%N)
echo "site.yml with the mismatched extension: rc=$rc in $(python3 -c "print(round($end - $start, 1))") s; current release before $before, after $(readlink /opt/ml-env)" >>"$summary"
grep -o "needs c10::cuda::c10_cuda_check_implementation[^;]*" "$out/abi-site.log" | sort -u | head -3 >>"$summary"

start=$(date +%s.%N)
ansible localhost -c local -e ansible_python_interpreter=/opt/torch/.venv/bin/python3 -m inferops.gpu.ml_env_check \
  -a '{"python": "/opt/torch/.venv/bin/python", "imports": [{"name": "torch"}], "extension_globs": ["'"$ext"'"], "command_timeout": 120}' \
  -o >"$out/abi-module.txt" 2>&1
rc=$?
end=$(date +%s.%N)
echo "ml_env_check alone: rc=$rc in $(python3 -c "print(round($end - $start, 1))") s" >>"$summary"
sed -e 's/^[^{]*//' "$out/abi-module.txt" | python3 -c 'import json, sys
r = json.load(sys.stdin)
json.dump({"ansible_rc": int(sys.argv[2]), "required": r["abi"]["required"], "providers": len(r["abi"]["providers"]),
           "missing": r["abi"]["missing"], "msg": r["msg"]}, open(sys.argv[1], "w"), indent=2)' "$out/abi-module.json" "$rc" \
  || tail -5 "$out/abi-module.txt" >>"$summary"
rm -f "$out/abi-module.txt"
cat "$summary"
