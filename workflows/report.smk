# Rendering: every paper table and figure, reported beside measured, with the diff and the measured scale.

RENDER_PREFIX = "" if RENDER in (".", "./", "") else f"{RENDER.rstrip('/')}/"  # "./x" paths make snakemake warn
TABLES = ([f"{RENDER_PREFIX}paper_tables/table{n}.{ext}" for n in (1, 2, 3, 4, 7) for ext in ("md", "csv", "tex")]
          + [f"{RENDER_PREFIX}paper_tables/{name}.{ext}" for name in ("prompt_lengths", "decode_load", "fp8_kv_real",
                                                                       "mqar_gla") for ext in ("md", "csv")])
FIGURE_NAMES = ("fig2", "fig3", "fig3_gpu", "fig4", "fig_mqar", "fig_mqar_gpu", "fig_conversion_loss", "fig_decode_load",
                "fig_scratch_position", "fig_scratch_lr")
FIGURES = [f"{RENDER_PREFIX}figures/{name}.{ext}" for name in FIGURE_NAMES for ext in ("png", "pdf")]


rule render:
    input:
        f"{RES}/quality.csv",
        f"{RES}/quality_pairs.csv",
        f"{RES}/ablation.csv",
        f"{RES}/ablation_pairs.csv",
        f"{RES}/conversion.csv",
        f"{RES}/niah.csv",
        f"{RES}/mqar.csv",
        GLA_PROBE_CSV,
        f"{RES}/prefill_cpu.csv",
        f"{RES}/prefill_128k.csv",
        f"{RES}/controls.csv",
        PRETRAINED_OUT,
        [f"{RES}/prompt_lengths.csv"] if LM.get("data") else [],
        sources("suite.render"),
        "paper_tables/claims.yaml",
        "paper_tables/reported",
    output:
        tables=[report(p, category="Tables") for p in TABLES],
        audit=report(f"{RENDER_PREFIX}paper_tables/claims_audit.md", category="Claims audit"),
        findings=f"{RENDER_PREFIX}paper_tables/findings.md",  # the README's findings at a glance
        figures=[report(p, category="Figures") for p in FIGURES if p.endswith(".png")],
        pdfs=[p for p in FIGURES if p.endswith(".pdf")],
    params:
        results=lambda w: RES,
        gpu_results=lambda w: GPU_OUT,
        tables=lambda w, output: folder(output.audit),
        figures=lambda w, output: folder(output.figures[0]),
    log:
        f"{WORK}/logs/render.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.render --results {params.results} --gpu-results {params.gpu_results} "
        "--out-tables {params.tables} --out-figures {params.figures} 2>&1 | tee {log}"
