# Benchmarks (benchmarks/): the CPU prefill-latency sweep of the small models (trained, or random weights:
# prefill_cpu.weights), a 128K-token CPU Prefill of a tiny Orthros, and (gpu profile only) the Qwen3-8B-shape system
# benchmarks whose committed CSVs in results/gpu/ feed the renderers in every profile. The system benchmarks are not
# part of `all` (about 12 minutes of H200 time, and the committed CSVs merge several longer runs: docs/performance.md):
# name the `benchmarks` target to run them (on an offline host: tools/offline_gpu/run.sh with TARGETS=benchmarks). With
# a pretrained base model (conversion.pretrained) the target also runs the FP8 K/V check on its real weights. The
# time-capped sequence (rule perf) and the multi-GPU benchmarks (rule multi_gpu) are targets of their own, below.

PREFILL_CODE = sources("benchmarks.prefill_cpu")
PREFILL = STUDY["prefill_cpu"]


# the archs whose main-size checkpoint the sweep loads: all (prefill_cpu.weights: trained) or none (random: latency
# does not depend on the weights' values, so the sweep runs without the training, e.g. in the gpu profile on a host
# that has not trained yet)
PREFILL_CHECKPOINTED = ARCHS if PREFILL.get("weights", "trained") == "trained" else []


rule prefill_cpu:
    input:
        runs=[METRICS.format(arch=a, size=MAIN, seed=SEED) for a in PREFILL_CHECKPOINTED],
        code=PREFILL_CODE,
    output:
        f"{RES}/prefill_cpu.csv",
    threads: THREADS
    log:
        f"{WORK}/logs/prefill_cpu.log",
    params:
        cfg=rule_config("prefill_cpu"),
        checkpoints=" ".join(f"--checkpoint {a}={RUN.format(arch=a, size=MAIN, seed=SEED)}/checkpoint"
                             for a in PREFILL_CHECKPOINTED),
        lengths=",".join(str(n) for n in PREFILL["lengths"]),
        repeats=PREFILL["repeats"],
        profile=PROFILE,
        archs=ARCH_LIST,
        size=MAIN,
    conda:
        CONDA_ENV
    shell:
        "python -m benchmarks.prefill_cpu --mode sweep --profile {params.profile} --archs {params.archs} "
        "--size {params.size} {params.checkpoints} --lengths {params.lengths} --repeats {params.repeats} "
        "--threads {threads} --out {output} > {log} 2>&1"


rule prefill_cpu_128k:
    """A 128K-token Prefill (T_out = 1) of a tiny random-weight Orthros on the CPU: time and peak memory."""
    input:
        PREFILL_CODE,
    output:
        f"{RES}/prefill_128k.csv",
    params:
        cfg=rule_config("prefill_cpu_128k"),
        profile=PROFILE,
    threads: THREADS
    log:
        f"{WORK}/logs/prefill_128k.log",
    conda:
        CONDA_ENV
    shell:
        "python -m benchmarks.prefill_cpu --mode 128k --profile {params.profile} --threads {threads} --out {output} "
        "> {log} 2>&1"


rule gpu_benchmarks:
    """Qwen3-8B shape, random bf16 weights, one GPU: prefill sweep (Fig. 4), E2E (Table 4), cost model."""
    input:
        code("benchmarks/gpu_all.sh"),
        sources("benchmarks.prefill_gpu", "benchmarks.e2e_gpu", "suite.cost_model"),
    output:
        prefill=f"{GPU_OUT}/prefill.csv",
        e2e=f"{GPU_OUT}/e2e.csv",
        cost=f"{GPU_OUT}/cost_model.csv",
    params:
        window=STUDY["window"],
        out=lambda w, output: folder(output.prefill),
    resources:
        gpu=1,
    log:
        f"{WORK}/logs/gpu_benchmarks.log",
    conda:
        CONDA_ENV
    shell:
        "OUT={params.out} WINDOW={params.window} TOTAL_S=1500 bash benchmarks/gpu_all.sh > {log} 2>&1"


rule fla_crosscheck:
    """25M, one GPU: FLA Triton kernels vs the naive route per mixer (fwd/bwd, bf16/fp32, T=2K) and the training
    throughput of every architecture (issue 3). GDN's backward on Hopper + Triton < 3.7.1 needs tilelang
    (docs/gpu.md)."""
    input:
        sources("benchmarks.fla_vs_naive"),
    output:
        crosscheck=f"{GPU_OUT}/fla_crosscheck.csv",
        throughput=f"{GPU_OUT}/baseline_throughput.csv",
    params:
        out=lambda w, output: folder(output.crosscheck),
    resources:
        gpu=1,
    log:
        f"{WORK}/logs/fla_crosscheck.log",
    conda:
        CONDA_ENV
    shell:
        "python -m benchmarks.fla_vs_naive --out-dir {params.out} > {log} 2>&1"


rule decode_load:
    """Decode under load: Orthros vs Transformer decode step against batch at 2K-128K contexts, one GPU, each cell
    predicted by the cost model first (after gpu_benchmarks, whose rates.json it reads)."""
    input:
        sources("benchmarks.decode_load", "suite.cost_model"),
        rates=rules.gpu_benchmarks.output.prefill,
    output:
        f"{GPU_OUT}/decode_load.csv",
    params:
        window=STUDY["window"],
        device=STUDY["device"],
        out=lambda w, output: folder(output[0]),
    resources:
        gpu=1,
    log:
        f"{WORK}/logs/decode_load.log",
    conda:
        CONDA_ENV
    shell:
        "python -m benchmarks.decode_load --device {params.device} --window {params.window} --paths compiled "
        "--decode-attn fa2,matmul --phases --rates {params.out}/rates.json --out-dir {params.out} > {log} 2>&1"


# FP8 K/V on real weights: the GPU profiles' pretrained base model (suite/experiments/conversion/pretrained.smk) and
# its English data
FP8_REAL = STUDY["device"] == "cuda" and bool(STUDY["conversion"].get("pretrained"))
if FP8_REAL:

    rule fp8_kv_real:
        """FP8 against bf16 K/V on the conversion experiment's pretrained model converted to Orthros (identity
        scale-offset, no training), over the held-out English text at 1K-8K tokens, one GPU. The model runs in
        float32: in bf16 the runner and the model's forward round differently, the path check fails and voids the
        targets; three FP8 scale blocks tell range error from mantissa error."""
        input:
            base=rules.base_model.output.base,
            test=rules.english_data.output.test,
            code=sources("benchmarks.fp8_kv_real"),
        output:
            f"{GPU_OUT}/fp8_kv_real.csv",
        params:
            cfg=rule_config("fp8_kv_real"),
            base=lambda w, input: folder(input.base),
            data=lambda w: ENGLISH,
            window=PRE["window"],
            device=STUDY["device"],
            profile=PROFILE,
            out=lambda w, output: folder(output[0]),
        resources:
            gpu=1,
        log:
            f"{WORK}/logs/fp8_kv_real.log",
        conda:
            CONDA_ENV
        shell:
            "python -m benchmarks.fp8_kv_real --base {params.base} --data-dir {params.data} --window {params.window} "
            "--dtype float32 --fp8-blocks 64,256,4096 --tokens 65536 "
            "--device {params.device} --profile {params.profile} --out-dir {params.out} > {log} 2>&1"


rule benchmarks:
    """The gpu profile's system benchmarks (opt-in target: `snakemake --cores all benchmarks --config profile=gpu`;
    the target before --config, which takes every word after it)."""
    input:
        rules.gpu_benchmarks.output,
        rules.fla_crosscheck.output,
        rules.decode_load.output,
        rules.fp8_kv_real.output if FP8_REAL else [],


# The time-capped system benchmarks: each part one command of under 10 minutes on one H200 (benchmarks/perf_all.sh
# says its steps, their caps and what each writes) into <results>/perf/<part>/, which `python -m
# benchmarks.merge_results --into results/gpu ...` merges into the committed CSVs afterwards. Parts: main (kernel
# checks, prefill sweep, decode step, training step, cost model, 1M-token FP8 prefill), table4, hybrids, load, and all
# (every step in one command). In a CPU profile every step runs at tiny size on the CPU (the plumbing check of
# tests/test_perf_all.py). Not part of `all` or `benchmarks`: name the folder, e.g. `snakemake --cores all
# --resources gpu=1 --config profile=gpu -- results/gpu/perf/main`; on an offline host whose commands are limited in
# time, tools/offline_gpu/run.sh with TARGETS=results/gpu/perf/main (the part stops before run.sh's TIME_CAP).
PERF_PARTS = ("main", "table4", "hybrids", "load", "all")
PERF_SMOKE = int(STUDY["device"] != "cuda")  # the CPU profiles: the same steps at tiny size
JOB_PYTHON = "$(python -c 'import sys; print(sys.executable)')"  # the job's interpreter, for the scripts' PYTHON


rule perf:
    """One part of the time-capped system benchmarks (above) on one GPU (alone on it with --resources gpu=1): a
    folder of CSVs and logs with steps.tsv (each step's exit status) and targets.csv (the pass/fail rows)."""
    input:
        code("benchmarks/perf_all.sh"),
        sources("benchmarks.attn_kernels", "benchmarks.prefill_gpu", "benchmarks.e2e_gpu", "benchmarks.train_step",
                "benchmarks.prefill_1m", "benchmarks.decode_load", "benchmarks.targets", "suite.cost_model"),
    output:
        directory(f"{RES}/perf/{{part}}"),
    wildcard_constraints:
        part="|".join(PERF_PARTS),
    params:
        smoke=PERF_SMOKE,
    resources:
        gpu=1 - PERF_SMOKE,
    log:
        f"{WORK}/logs/perf_{{part}}.log",
    conda:
        CONDA_ENV
    shell:
        f"PYTHON={JOB_PYTHON} OUT={{output}} PART={{wildcards.part}} SMOKE={{params.smoke}} "
        "bash benchmarks/perf_all.sh > {log} 2>&1"


rule multi_gpu:
    """Multi-GPU benchmarks on one host (benchmarks/multi_gpu_all.sh, about 6 minutes on 2 GPUs): sequence-parallel
    prefill at 1 and N GPUs (seq_parallel.csv) and data-parallel training, 1 vs N GPUs (multi_gpu_train.csv), with
    their targets.csv; data and checkpoints under the work folder. In a CPU profile a CPU/gloo miniature on 2
    processes (tests/test_multi_gpu.py). Not part of `all`: name the folder (<results>/perf/multi_gpu)."""
    input:
        code("benchmarks/multi_gpu_all.sh"),
        sources("benchmarks.seq_parallel_gpu", "benchmarks.multi_gpu_train", "suite.train.run", "suite.data.corpus",
                "suite.data.tokenizer"),
    output:
        directory(f"{RES}/perf/multi_gpu"),
    params:
        smoke=PERF_SMOKE,
        nproc=2,
        work=lambda w: f"{WORK}/multi_gpu",
    resources:
        gpu=2 * (1 - PERF_SMOKE),
    log:
        f"{WORK}/logs/multi_gpu.log",
    conda:
        CONDA_ENV
    shell:
        f"PYTHON={JOB_PYTHON} OUT={{output}} WORK={{params.work}} NPROC={{params.nproc}} SMOKE={{params.smoke}} "
        "bash benchmarks/multi_gpu_all.sh > {log} 2>&1"


if STUDY["device"] == "cuda":  # gpu and slurm profiles; not part of `all` (one host with >= 2 GPUs): name the CSV

    rule seq_parallel:
        """Sequence-parallel prefill of Orthros and the Transformer on 1 vs resources.gpu GPUs of one host (torchrun),
        128K..1M, with the cost model's predictions (issue 13). In the slurm profile the executor's srun wraps it."""
        input:
            sources("benchmarks.seq_parallel_gpu"),
        output:
            f"{GPU_OUT}/seq_parallel.csv",
        params:
            window=STUDY["window"],
        resources:
            gpu=2,
        log:
            f"{WORK}/logs/seq_parallel.log",
        conda:
            CONDA_ENV
        shell:
            "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
            "python -m torch.distributed.run --standalone --nproc_per_node {resources.gpu} "
            "-m benchmarks.seq_parallel_gpu --window {params.window} --out {output} > {log} 2>&1"
