#!/usr/bin/env bash
# One lease on the GPU machine, in parts (each part fits one 10-minute device call):
#   bash scripts/gpu_session.sh PART...   with PART in: env native isolation trust evaluator suites tb rocm some lsp
#                                         eval batch scaling run1 run2 check sanitize profile split
#                                         search speed aasmall eval1 eval2 probecost snapshots gputests base
#                                         scripted lspbase repo lspmodule
# `split` runs groups of parts at once, each on its GPUs: SPLIT="0:tb 1:native,rocm 2:trust 3:eval 4,5:scaling" (logs
# in $OUT/gpuN.log). A machine with several GPUs then does in one call what one GPU does in several. Groups share the
# host: heavy groups side by side (both suites, two `geak eval`s, A/A) slow each other many times over, so figures to
# report come from a call doing only them; SPLIT_CORES=1 gives each group its share of the cores.
# Python packages missing there travel as wheels in .whl/ (`scripts/device_wheels.sh` fetches them); GEAK itself is
# put on the path as a namespace package (a copy, no install). Every part writes its logs and JSON under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/geak-out}
SITE=/opt/geak-site  # not under /tmp or the project, which isolated jobs do not see
mkdir -p "$OUT" "$SITE/geak"
if [ -z "${SITE_READY:-}" ]; then  # set by `split` for its groups, which share one copy
  if [ -d .whl ] && [ ! -e "$SITE/.installed" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      .whl/*.whl && touch "$SITE/.installed"
  fi
  for d in evaluator agent server snippets; do rm -rf "${SITE:?}/geak/$d"; cp -r "$d" "$SITE/geak/$d"; done
fi
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1
TB=shared/suites/tritonbench_revised/TritonBench_G_v1
ROCM=shared/suites/rocm/ROCm_v1

part_env() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  python3 -m geak.server.cli --version 2>/dev/null || true
}
part_gputests() {  # the test files in $GPU_TESTS on this GPU (default: the pool, the device share, forked compiles)
  GEAK_SERVICE=0 GEAK_COMPILE_CACHE=off timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider \
    ${GPU_TESTS:-tests/test_worker_pool.py tests/test_device_share.py tests/test_forked_compiles.py} 2>&1 | tail -20
}
part_native() {
  python3 benchmarks/suite_report.py "$TB" --only native --native-jobs 14 --native-timeout 150 --out "$OUT/tb" | tail -2
  python3 benchmarks/suite_report.py "$ROCM" --only native --native-jobs 14 --native-timeout 150 \
    --shim evaluator/job/shims --out "$OUT/rocm" | tail -2
}
part_trust() {  # TRUST_ARGS e.g. "--parts hostile,aa --hostile forged_timer.py"
  timeout "$(( ${TRUST_S:-240} + 60 ))" python3 benchmarks/gpu_trust_report.py --out "$OUT" --budget-s "${TRUST_S:-240}" \
    ${TRUST_ARGS:-} 2>&1 | tee "$OUT/trust.log"
}
part_sanitize() {  # the golden files named in $SANITIZE under compute-sanitizer (memcheck), then 10 native runs each
  local f
  for f in ${SANITIZE:-}; do
    echo "## $f"; (cd "$TB" && timeout 120 compute-sanitizer --tool memcheck --print-limit 5 python3 "$f" 2>&1 | tail -25)
    (cd "$TB" && for i in 1 2 3 4 5 6 7 8 9 10; do timeout 60 python3 "$f" >/dev/null 2>&1 && echo -n "ok " || echo -n "FAIL "; done; echo)
  done
}
part_profile() {  # where a check's and a bench's time goes (PROFILE_FILES: TritonBench-revised names or paths)
  timeout 300 python3 benchmarks/phase_profile.py ${PROFILE_FILES:-} 2>&1 | tail -150
}
part_isolation() {
  timeout 200 python3 benchmarks/isolation_cost.py tests/fixtures/add_native.py --checks 20 --backend gpu 2>&1
}
part_evaluator() { timeout 240 python3 benchmarks/gpu_evaluator_report.py --out "$OUT" 2>&1 | tail -40; }
part_suites() {
  local native=${NATIVE:-$OUT}
  timeout "${TB_S:-420}" python3 benchmarks/suite_report.py "$TB" --native-json "$native/tb/native.json" \
    --jobs "${JOBS:-8}" --timeout 120 --out "$OUT/tb" 2>&1 | grep -v '^\['
  timeout "${ROCM_S:-150}" python3 benchmarks/suite_report.py "$ROCM" --native-json "$native/rocm/native.json" \
    --jobs "${JOBS:-8}" --timeout 120 --out "$OUT/rocm" 2>&1 | grep -v '^\['
}
part_tb() {  # ORDER_FROM: an earlier run's results.json, whose slowest files start first
  timeout "${TB_S:-540}" python3 benchmarks/suite_report.py "$TB" --native-json "${NATIVE:-$OUT}/tb/native.json" \
    --jobs "${JOBS:-12}" --timeout 150 --out "$OUT/tb" ${ORDER_FROM:+--order-from "$ORDER_FROM"} 2>&1 | grep -v '^\['
}
part_rocm() {
  timeout "${ROCM_S:-330}" python3 benchmarks/suite_report.py "$ROCM" --native-json "${NATIVE:-$OUT}/rocm/native.json" \
    --jobs "${JOBS:-8}" --timeout 300 --out "$OUT/rocm" 2>&1 | grep -v '^\['
}
part_some() {  # the suite files named in $TB_FILES / $ROCM_FILES (e.g. what an earlier call did not reach)
  local native=${NATIVE:-$OUT}
  [ -z "${TB_FILES:-}" ] || timeout "${TB_S:-150}" python3 benchmarks/suite_report.py "$TB" --files-from "$TB_FILES" \
    --native-json "$native/tb/native.json" --jobs "${JOBS:-12}" --timeout 200 --out "$OUT/tb" 2>&1 | grep -v '^\['
  [ -z "${ROCM_FILES:-}" ] || timeout "${ROCM_S:-60}" python3 benchmarks/suite_report.py "$ROCM" --files-from \
    "$ROCM_FILES" --native-json "$native/rocm/native.json" --jobs 5 --timeout 300 --out "$OUT/rocm" 2>&1 | grep -v '^\['
}
part_lsp() {
  timeout "${LSP_BENCH_S:-280}" python3 benchmarks/lsp_bench.py --budget "${LSP_BUDGET:-4}" 2>&1 | tail -25
  timeout 200 python3 benchmarks/lsp_session_report.py --kernel tests/fixtures/add_slow.py --budget 16 2>&1 | tail -60
}
part_batch() {
  timeout 330 python3 benchmarks/gpu_batch_report.py --data shared/suites/tritonbench_revised --problems "${PROBLEMS:-20}" \
    --budget 2 --eval-problems "${EVAL_PROBLEMS:-40}" --rounds 5 --deadline-s "${BATCH_S:-300}" --out "$OUT/batch" 2>&1 | tail -40
}
part_eval() {  # `geak eval` of the golden files as their own predictions (one GPU)
  timeout "${EVAL_S:-520}" python3 benchmarks/gpu_batch_report.py --data shared/suites/tritonbench_revised --parts eval \
    --eval-start "${EVAL_START:-0}" --eval-problems "${EVAL_PROBLEMS:-184}" --rounds 5 --deadline-s "$(( ${EVAL_S:-520} - 20 ))" --out "$OUT/eval" \
    2>&1 | tail -60
}
part_check() {  # `geak check` of the files named in $CHECK_FILES (paths), one by one, 300 s per run of the tests
  local f
  for f in ${CHECK_FILES:-}; do
    timeout 330 python3 -m geak.server.cli check "$f" --timeout 300; echo "exit $? for $f"
  done
}
batch_report() {  # gpu_batch_report.py's `geak run` PARTS (run1: one GPU, run2: two) into $OUT/FOLDER
  timeout "${BATCH_S:-540}" python3 benchmarks/gpu_batch_report.py --data shared/suites/tritonbench_revised \
    --parts "$1" --problems "${PROBLEMS:-24}" --budget 2 --rounds 5 --deadline-s "$(( ${BATCH_S:-540} - 20 ))" \
    --out "$OUT/$2" 2>&1 | tail -60
}
part_scaling() { batch_report "${SCALING_PARTS:-run1,run2}" scaling; }  # one GPU, then two, in turn
part_run1() { batch_report run1 run1; }  # one GPU alone, in its own folder: it can run beside part_run2
part_run2() { batch_report run2 run2; }  # the same on two GPUs
part_search() {  # the launch search's sample report; in `split`, one shard per GPU (SEARCH_SHARDS of them), e.g.
  # SEARCH_SHARDS=4 SEARCH_ARGS="--files-json benchmarks/records/search_measured_h200.json" SPLIT_CORES=1 SPLIT="0:search 1:search 2:search 3:search"
  timeout "$(( ${SEARCH_S:-540} + 30 ))" python3 benchmarks/search_report.py --out "$OUT/search" --deadline-s \
    "${SEARCH_S:-540}" --runs-dir /tmp/geak-search-runs --shard "${CUDA_VISIBLE_DEVICES:-0}/${SEARCH_SHARDS:-1}" \
    ${SEARCH_ARGS:-} 2>&1 | grep -v '^    '
}
speed_report() {  # speed_report.py's PARTS; its folders stay outside $OUT, its summaries come back in $OUT/speed
  timeout "${SPEED_S:-540}" python3 benchmarks/speed_report.py "$@" --out /tmp/geak-speed 2>&1 | tail -40
  mkdir -p "$OUT/speed" && cp /tmp/geak-speed/*.json "$OUT/speed/" 2>/dev/null
}
part_speed() {  # fresh `geak bench` commands, A/A through one evaluator, the language server's didSave
  speed_report cli aa
  timeout 200 python3 benchmarks/lsp_bench.py --saves 10 --requests 50 --budget 20 --json > /tmp/geak-speed/lsp.json
  cp /tmp/geak-speed/lsp.json "$OUT/speed/" && head -c 1500 /tmp/geak-speed/lsp.json
}
part_aasmall() { speed_report aa-small --repeats "${AA_REPEATS:-2}"; }  # the µs-scale calls' placement band
part_eval1() {  # EVAL_ARGS e.g. "--eval-timeout 270 --file-timeout 120"
  speed_report eval --gpu-ids 0 --eval-parts "${EVAL_PARTS:-timed,no-timing,judge}" ${EVAL_ARGS:-}
}
part_eval2() { speed_report eval --gpu-ids 0,1 --eval-parts timed; }  # in `split`, a group of two GPUs
part_probecost() {  # the probes' cost: suite files checked against themselves with and without them
  timeout "${PROBE_S:-400}" python3 benchmarks/probe_report.py "$TB" "$ROCM" --jobs 12 --baseline \
    --limit "${PROBE_LIMIT:-40}" --out "$OUT/probecost" 2>&1 | tail -30
}
part_snapshots() {  # $OUT packed into $SNAPSHOT (e.g. $REAL_OUT/out.tgz) every SNAPSHOT_S seconds in the background
  # and once more when this script exits, so that a call cut short by its time limit brings back what was written
  ( while sleep "${SNAPSHOT_S:-60}"; do tar czf "${SNAPSHOT:?}.part" -C "$OUT" . && mv "$SNAPSHOT.part" "$SNAPSHOT"
    done ) > /dev/null 2>&1 &
  trap "kill $! 2>/dev/null; tar czf '${SNAPSHOT:?}' -C '$OUT' ." EXIT
}
part_base() {  # `geak bench --base` on corpus kernels in git repositories made for it (issue 63's targets)
  timeout "${BASE_S:-420}" python3 benchmarks/base_report.py --out "$OUT/base" ${BASE_ARGS:-} 2>&1 | tail -40
}
part_scripted() {  # `geak run` over suite files with a scripted model built from the files (issue 65's target)
  timeout "${SCRIPTED_S:-570}" python3 benchmarks/scripted_run_report.py --files "${SCRIPTED_FILES:-10}" \
    --out "$OUT/scripted" ${SCRIPTED_ARGS:-} 2>&1 | tail -40
}
part_lspbase() {  # didSave -> diagnostics with the base comparison off and on, then with the timing (issue 63)
  timeout 240 python3 benchmarks/lsp_base_bench.py --device gpu --saves 10 --out "$OUT/lsp_base.json" 2>&1 | tail -15
  timeout 240 python3 benchmarks/lsp_base_bench.py --device gpu --saves 10 --timing --out "$OUT/lsp_base_timed.json" \
    2>&1 | tail -15
}
part_lspmodule() {  # didSave -> diagnostics of Liger's rms_norm.py in the editor, within a budget (issue 64)
  timeout 540 python3 benchmarks/lsp_module_bench.py --repo shared/repos/liger-kernel --device gpu --saves 5 \
    --budget-s "${MODULE_BUDGET_S:-20}" --out "$OUT/lsp_module.json" 2>&1 | tail -20
}
part_repo() {  # benchmarks/repo_report.py over Liger-Kernel: REPO_MODE check|optimize, REPO_MODULES (check: all)
  local mode=${REPO_MODE:-check}
  timeout "${REPO_S:-560}" python3 benchmarks/repo_report.py "$mode" --repo shared/repos/liger-kernel ${REPO_ARGS:-} \
    --out "$OUT/repo_$mode.json" ${REPO_MODULES:-} 2>&1 | tee -a "$OUT/repo_$mode.log" | tail -45
}
part_split() {  # SPLIT_CORES=1: each group pinned to its share of the cores (taskset), so that one group's compiles
  # do not stall another's host-bound timings (several searches, each with a compile process per core)
  local pids=() group gpu parts groups per i=0
  groups=(${SPLIT:?})
  per=$(( $(nproc) / ${#groups[@]} ))
  for group in "${groups[@]}"; do
    gpu=${group%%:*}
    parts=${group#*:}
    (export SITE_READY=1 CUDA_VISIBLE_DEVICES=$gpu
      if [ -n "${SPLIT_CORES:-}" ] && [ "$per" -ge 2 ]; then  # inherited by every process the group starts
        taskset -cp "$(( i * per ))-$(( i * per + per - 1 ))" $BASHPID > /dev/null
      fi
      for p in ${parts//,/ }; do echo "=== $p ($(date +%T))"; "part_$p"; done) > "$OUT/gpu${gpu//,/-}.log" 2>&1 &
    pids+=($!)
    i=$(( i + 1 ))
  done
  wait "${pids[@]}"
}
for part in "$@"; do
  echo "=== $part ($(date +%T))"
  "part_$part"
done
