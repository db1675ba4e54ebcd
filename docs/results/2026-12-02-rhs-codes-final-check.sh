set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=$(mktemp -d)
grid='#moe.gemm_config<mma = bf16_operands, tile = [128, 128, 64], mma_shape = [64, 128, 16], stages = 6, dequant_stages = 2, warpgroups = [1, 2], registers = [40, 232], rhs_codes = true>'
check() {  # LABEL LAYER FLAG...
  local label=$1 layer=$2; shift 2
  moe-run --target=sm90a --layer $layer --empty-experts 1 --outputs $out/a "$@" > $out/la 2>&1
  local ra=$(grep -c " PASS$" $out/la); local sa=$(tail -1 $out/la)
  moe-run --target=sm90a --layer $layer --empty-experts 1 --outputs $out/b > $out/lb 2>&1
  local diff=0 f
  for f in $out/b/*.npy; do cmp -s $f $out/a/$(basename $f) || diff=$((diff + 1)); done
  echo "$label $layer: $sa ($ra outputs PASS vs R_mx), $diff of $(ls $out/b | wc -l) outputs differ from the default"
  rm -rf $out/a $out/b
}
check "--rhs-codes" T=512,H=512,I=160,E=4,K=2,B=128,quant=e5m2,affinity=on_h --rhs-codes
check "--rhs-codes" T=300,H=256,I=96,E=4,K=2,B=128,checkpoint=bf16,bias=on --rhs-codes
check "--rhs-codes" T=1024,H=1024,I=512,E=8,K=2,B=128 --rhs-codes
check "--rhs-codes" T=4096,H=1024,I=512,E=8,K=2,B=128,checkpoint=bf16 --rhs-codes
check "P1 rhs_codes one CTA per tile" T=1024,H=1024,I=512,E=8,K=2,B=128 "--gemm-config-at=1=$grid"
compute-sanitizer --tool memcheck --error-exitcode 1 moe-run --target=sm90a --rhs-codes \
  --layer T=1024,H=512,I=256,E=8,K=2,B=128 --empty-experts 1 --check none > $out/mc 2>&1 \
  && echo "memcheck --rhs-codes PASS" || { tail -5 $out/mc; echo "memcheck FAIL"; }
moe-run --target=sm90a --gemm M=8192,N=8192,K=8192,G=1 --rhs-codes --repeat 5 | grep -E "result0|TFLOPS|^moe-run: (PASS|FAIL)"
