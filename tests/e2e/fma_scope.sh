#!/usr/bin/env bash
# Same bits on every CPU: the only fused multiply-adds in ptq are the GEMM's, whose paths all
# compute the same FMA chain (sgemm.h). Every other kernel has a written order and may be
# cloned for AVX2/AVX-512 (target_clones) only as long as no FMA contraction or other
# reassociation creeps in: an FMA rounds once where a multiply and an add round twice, so a
# clone with one would give other bits than the baseline build on another CPU. This checks
# the compiled objects: no FMA instruction outside runtime/kernels/sgemm_avx2.o and
# sgemm_avx512.o (the generic path calls fmaf, correctly rounded like the instruction).
. "$(dirname "$0")/lib.sh"
OBJ=$ROOT/$BUILD/obj
found=""
n=0
for o in $(find "$OBJ/runtime" "$OBJ/calib" "$OBJ/quant" "$OBJ/preprocess" "$OBJ/io" "$OBJ/cli" -name '*.o' | sort); do
  n=$((n + 1))
  case "$o" in */runtime/kernels/sgemm_avx2.o|*/runtime/kernels/sgemm_avx512.o) continue ;; esac
  c=$(objdump -d "$o" | grep -cE '\svfn?m(add|sub)(132|213|231)?[ps][sd]\s|\svfmaddsub|\svfmsubadd')
  [ "$c" = 0 ] || found="$found ${o#$OBJ/}:$c"
done
check "objects checked" test "$n" -gt 40
check "no FMA outside the GEMM's SIMD paths${found:+ (found in$found)}" test -z "$found"
check "the GEMM's SIMD paths do use FMA" bash -c "objdump -d '$OBJ/runtime/kernels/sgemm_avx512.o' | grep -q vfmadd && objdump -d '$OBJ/runtime/kernels/sgemm_avx2.o' | grep -q vfmadd"
finish
