# env.sh: source it (". ./env.sh") in the unpacked GPU bundle before running
# its binaries on a GPU host: it checks for an NVIDIA GPU and its driver and
# points the loader at the CUDA 13 libraries hone's CUDA build needs
# (libcudart.so.13, libcublas.so.13, libcublasLt.so.13), wherever this
# machine has them, by prepending their folders to LD_LIBRARY_PATH:
#
#   $CUDA_HOME/lib64 (and lib), /usr/local/cuda/lib64, /usr/local/cuda-13*/lib64,
#   NVIDIA's wheels in a Python's site-packages (nvidia/**: the python in
#   $PYTHON, else python3; e.g. PyTorch's cu13 wheels), the loader's cache
#   (ldconfig), and last the bundle's own lib/ (libcudart.so.13 only).
#
# It returns (when sourced; exits when run) 0 when everything was found,
# 2 when there is no usable GPU (no nvidia-smi, nvidia-smi lists none or
# fails, no libcuda.so.1), 3 when the GPU is there but the CUDA 13 libraries
# are not; the reason is on stderr, and so is what was found. Nothing here
# needs Go, a network or root.

hone_gpu_env() {
	local here="$1"
	# 1. A GPU and its driver.
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "hone gpu bundle: no NVIDIA GPU here: nvidia-smi is not installed (no NVIDIA driver); this bundle runs hone's CUDA build on a GPU host" >&2
		return 2
	fi
	local list
	if ! list="$(nvidia-smi -L 2>&1)" || ! printf '%s\n' "$list" | grep -q '^GPU [0-9]'; then
		echo "hone gpu bundle: no NVIDIA GPU here: nvidia-smi -L lists none ($(printf '%s' "$list" | head -n 2 | tr '\n' ' '))" >&2
		return 2
	fi
	local libcuda="" d llp="${LD_LIBRARY_PATH:-}"
	for d in ${llp//:/ } /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
		if [ -e "$d/libcuda.so.1" ]; then libcuda="$d/libcuda.so.1"; break; fi
	done
	if [ -z "$libcuda" ] && command -v ldconfig >/dev/null 2>&1; then
		libcuda="$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libcuda\.so\.1 .*=> //p' | head -n 1)"
	fi
	if [ -z "$libcuda" ]; then
		echo "hone gpu bundle: no usable GPU: nvidia-smi lists one, but the driver's libcuda.so.1 is nowhere the loader looks (LD_LIBRARY_PATH, /usr/lib/x86_64-linux-gnu, /usr/lib64, ldconfig)" >&2
		return 2
	fi
	# 2. The CUDA 13 libraries.
	local cands=() py
	[ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib")
	[ -n "${CUDA_PATH:-}" ] && cands+=("$CUDA_PATH/lib64" "$CUDA_PATH/lib")
	cands+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
	for d in /usr/local/cuda-13*/lib64; do [ -d "$d" ] && cands+=("$d"); done
	py="${PYTHON:-python3}"
	if command -v "$py" >/dev/null 2>&1; then
		local sp
		sp="$("$py" - 2>/dev/null <<'PY'
import glob, os, site
dirs = set()
paths = list(site.getsitepackages()) + [site.getusersitepackages()]
for sp in paths:
    for pat in ("libcublas*.so.13", "libcudart.so.13"):
        for p in glob.glob(os.path.join(sp, "nvidia", "**", pat), recursive=True):
            dirs.add(os.path.dirname(p))
print("\n".join(sorted(dirs)))
PY
)"
		while IFS= read -r d; do [ -n "$d" ] && cands+=("$d"); done <<<"$sp"
	fi
	local ldcache=""
	command -v ldconfig >/dev/null 2>&1 && ldcache="$(ldconfig -p 2>/dev/null)"
	local lib found dirs=() missing=() where=()
	for lib in libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
		found=""
		for d in "${cands[@]}"; do
			if [ -e "$d/$lib" ]; then found="$d"; break; fi
		done
		if [ -z "$found" ] && printf '%s\n' "$ldcache" | grep -q "^[[:space:]]*$lib "; then
			found="(ldconfig)"
		fi
		if [ -z "$found" ] && [ -e "$here/lib/$lib" ]; then found="$here/lib"; fi
		if [ -z "$found" ]; then
			missing+=("$lib")
			continue
		fi
		where+=("$lib: $found")
		if [ "$found" != "(ldconfig)" ]; then
			case " ${dirs[*]:-} " in *" $found "*) ;; *) dirs+=("$found") ;; esac
		fi
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "hone gpu bundle: the GPU is there, but not the CUDA 13 libraries: ${missing[*]} not found (looked in" \
			"\$CUDA_HOME, /usr/local/cuda*, ${py}'s site-packages/nvidia, the loader's cache, $here/lib). Install" \
			"NVIDIA's wheels into a python (python3 -m pip install nvidia-cublas==13.* nvidia-cuda-runtime==13.*, or" \
			"PyTorch built for CUDA 13) and set PYTHON to it, or install CUDA 13 and set CUDA_HOME" >&2
		return 3
	fi
	local joined
	joined="$(IFS=:; printf '%s' "${dirs[*]:-}")"
	if [ -n "$joined" ]; then
		export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	fi
	echo "hone gpu bundle: $(printf '%s' "$list" | head -n 1); driver library $libcuda" >&2
	for d in "${where[@]}"; do echo "hone gpu bundle:   $d" >&2; done
	return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	# Run, not sourced: report and exit with the status.
	hone_gpu_env "$(cd "$(dirname "$0")" && pwd)"
	rc=$?
	[ $rc = 0 ] && echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	exit $rc
else
	hone_gpu_env "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fi
