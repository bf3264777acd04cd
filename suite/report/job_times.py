"""What each GPU job took, from snakemake's own records, and the study's GPU time summed from them.

Snakemake keeps a record of every output it made (``.snakemake/metadata/<output path, base64>``: the rule, and the
job's start and end times). ``record`` turns the records of the jobs that ended after a moment (a time-capped call's
start) and whose outputs exist (a failed job's are removed) into one CSV row a job, with the call's device, commit,
concurrency and whole length; ``tools/offline_gpu/run.sh`` writes it into ``results/gpu/job_times/`` at the end of
every call, so each part brings back what its jobs took.
``summary`` totals those files per rule: jobs, seconds (sum, median, max) and the share of all job-seconds, and the
calls' own seconds (the time the GPU host was held, setup and copies aside). Jobs that shared the GPU
(``gpu_jobs`` > 1) overlap, so their seconds add up to more than the calls took.

    python -m suite.report.job_times record --metadata .snakemake/metadata --since EPOCH --out F.csv [--device ...]
    python -m suite.report.job_times summary --inputs results/gpu/job_times/*.csv --out results/gpu/gpu_time.csv
"""
from __future__ import annotations

import argparse
import base64
import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from suite.cli import in_file, in_folder, nonnegative_float, out_file, positive_int, usage_errors
from suite.provenance import read_csv, write_csv

COLUMNS = ["rule", "outputs", "start_utc", "end_utc", "seconds", "call", "call_s", "gpu_jobs", "device", "commit"]


def _output_path(record: Path, root: Path) -> str:
    """The output a metadata record is named after: its path below ``root``, base64 (snakemake's file store splits
    a long name into folders, each named with a leading '@')."""
    return base64.urlsafe_b64decode("".join(p.removeprefix("@") for p in record.relative_to(root).parts)).decode()


JOB_GAP_S = 5.0  # a job's outputs are recorded within milliseconds of each other; two runs of a job, minutes apart


def jobs(metadata: Path, since: float, root: Path | None = None) -> list[dict]:
    """One dict a finished job that ended at or after ``since`` (seconds since the epoch): its rule, outputs, start,
    end and seconds, oldest first. Records without times (a ``--touch``) or still incomplete are left out, and with
    ``root`` those whose output is not under it: snakemake removes a failed job's outputs but keeps their records."""
    records = []
    for path in sorted(p for p in metadata.rglob("*") if p.is_file()):
        try:
            meta = json.loads(path.read_text())
            output = _output_path(path, metadata)
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not a snakemake metadata record ({err})") from err
        start, end = meta.get("starttime"), meta.get("endtime")
        if start is None or end is None or meta.get("incomplete") or end < since:
            continue
        if root is not None and not (root / output).exists():
            continue
        records.append((meta["rule"], str(meta.get("job_hash")), start, end, output))
    # one job: the same rule and hash, its outputs recorded within JOB_GAP_S of each other
    grouped: list[dict] = []
    for rule, job_hash, start, end, output in sorted(records, key=lambda r: (r[0], r[1], r[3])):
        last = grouped[-1] if grouped else None
        if last and (last["rule"], last["hash"]) == (rule, job_hash) and end - last["end"] <= JOB_GAP_S:
            last.update(start=min(last["start"], start), end=max(last["end"], end))
            last["outputs"].append(output)
        else:
            grouped.append({"rule": rule, "hash": job_hash, "start": start, "end": end, "outputs": [output]})
    out = [{"rule": job["rule"], "outputs": " ".join(sorted(job["outputs"])), "start_utc": _utc(job["start"]),
            "end_utc": _utc(job["end"]), "seconds": round(job["end"] - job["start"], 1)} for job in grouped]
    return sorted(out, key=lambda row: (row["start_utc"], row["rule"]))


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per rule: jobs, seconds summed, median and max, share of all job-seconds; then a row ``all jobs`` and a row
    ``calls`` (the calls' own seconds, each call once). Largest first."""
    if rows.empty:
        raise ValueError("no job rows to sum")
    seconds = pd.to_numeric(rows["seconds"], errors="raise")
    per = (rows.assign(seconds=seconds).groupby("rule")["seconds"]
           .agg(jobs="count", seconds="sum", median_s="median", max_s="max").reset_index())
    per["share"] = per["seconds"] / seconds.sum()
    per = per.sort_values(["seconds", "rule"], ascending=[False, True])
    calls = rows.drop_duplicates("call")
    devices = ", ".join(sorted(set(rows["device"].dropna().astype(str)) - {""}))
    total = {"rule": "all jobs", "jobs": len(rows), "seconds": seconds.sum(), "median_s": seconds.median(),
             "max_s": seconds.max(), "share": 1.0}
    held = {"rule": "calls", "jobs": len(calls), "seconds": pd.to_numeric(calls["call_s"]).sum(), "median_s": None,
            "max_s": None, "share": None}
    out = pd.concat([per, pd.DataFrame([total, held])], ignore_index=True)
    out["devices"] = devices
    return out.round({"seconds": 1, "median_s": 1, "max_s": 1, "share": 4})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="the jobs of one call, from snakemake's metadata")
    rec.add_argument("--metadata", type=in_folder, default=".snakemake/metadata")
    rec.add_argument("--since", type=nonnegative_float, required=True, help="the call's start, seconds since the epoch")
    rec.add_argument("--root", type=in_folder, default=".",
                     help="the folder the outputs' paths are relative to: a job whose outputs are not there failed")
    rec.add_argument("--call-s", type=nonnegative_float, default=None, help="the call's own seconds")
    rec.add_argument("--gpu-jobs", type=positive_int, default=None, help="how many jobs could share the GPU")
    rec.add_argument("--device", default="", help="the GPU, as nvidia-smi names it")
    rec.add_argument("--commit", default="")
    rec.add_argument("--out", type=out_file, required=True)
    summ = sub.add_parser("summary", help="every call's jobs, totalled per rule")
    summ.add_argument("--inputs", type=in_file, nargs="+", required=True)
    summ.add_argument("--out", type=out_file, required=True)
    args = ap.parse_args(argv)
    with usage_errors(ap):
        if args.cmd == "record":
            found = jobs(Path(args.metadata), args.since, Path(args.root))
            if not found:
                print(f"no job of {args.metadata} ended after {_utc(args.since)}: nothing written")
                return
            call = Path(args.out).stem
            write_csv([{**job, "call": call, "call_s": args.call_s, "gpu_jobs": args.gpu_jobs, "device": args.device,
                        "commit": args.commit} for job in found], args.out)
            print(f"{len(found)} jobs, {sum(j['seconds'] for j in found):.0f} job-seconds -> {args.out}")
        else:
            rows = pd.concat([read_csv(p) for p in args.inputs], ignore_index=True)
            missing = [c for c in COLUMNS if c not in rows]
            if missing:
                raise ValueError(f"{' '.join(args.inputs)}: no {missing}: not job-time files (record writes them)")
            write_csv(summary(rows), args.out)
            print(f"{len(rows)} jobs of {rows['call'].nunique()} calls -> {args.out}")


if __name__ == "__main__":
    main()
