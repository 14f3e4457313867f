#!/usr/bin/env python3
"""Fits rnccl's kernel cost model (src/exec/gpu/cost.rs) to `rnccl bench` or nccl-tests logs.

For every log: the out-of-place time t (µs) against the size in bytes, sizes from --min to
--max, fitted as t = alpha + bytes / (beta * 1000) by least squares on the relative error (a
1 MiB point counts as much as a 64 MiB one). Prints alpha (µs), beta (GB/s of the larger
buffer), the worst relative error and the residual of every point. Runs of the same kernel
(several rounds) go in as several logs; each size's median is fitted.

    perf/fit_costs.py [--min 1M] [--max 64M] LOG [LOG...]
"""
import argparse
import statistics
import sys

from bench_rows import result_rows

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text):
    text = text.strip()
    if text and text[-1].upper() in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1].upper()])
    return int(text)


def points(paths, lo, hi):
    """Per size from lo to hi, the median out-of-place time over the logs."""
    times = {}
    for path in paths:
        for f in result_rows(path):
            b = int(f[0])
            if lo <= b <= hi:
                times.setdefault(b, []).append(float(f[5]))
    return sorted((b, statistics.median(ts)) for b, ts in times.items())


def fit(pts):
    """(alpha, beta in GB/s) minimising the squared relative error."""
    w = [1 / t**2 for _, t in pts]
    sw = sum(w)
    sx = sum(wi * b for wi, (b, _) in zip(w, pts))
    sy = sum(wi * t for wi, (_, t) in zip(w, pts))
    sxx = sum(wi * b * b for wi, (b, _) in zip(w, pts))
    sxy = sum(wi * b * t for wi, (b, t) in zip(w, pts))
    slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    alpha = (sy - slope * sx) / sw
    return alpha, 1 / slope / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", default="1M", type=size)
    ap.add_argument("--max", default="64M", type=size)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    pts = points(a.logs, a.min, a.max)
    if len(pts) < 2:
        sys.exit(f"fit_costs.py: fewer than two sizes from {a.min} to {a.max} B in {a.logs}")
    alpha, beta = fit(pts)
    worst = 0.0
    for b, t in pts:
        p = alpha + b / (beta * 1e3)
        worst = max(worst, abs(p - t) / t)
        print(f"{b:>12} B  measured {t:9.2f} us  fitted {p:9.2f} us  {100 * (p - t) / t:+5.1f}%")
    print(f"alpha {alpha:.1f} us, beta {beta:.0f} GB/s, worst {100 * worst:.1f}%")


if __name__ == "__main__":
    main()
