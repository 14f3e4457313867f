"""The result rows of an nccl-tests or `rnccl bench` text log, for the tables perf/'s scripts
print (their heredocs import this with perf/ on sys.path; perf/fit_costs.py beside it).

A result row is a line of 13 or more fields, not a `#` comment, whose first field is a size.
Fields in nccl-tests' order: 0 size (bytes), 1 count (elements), 2 type, 3 reduction, 4 root,
5 out-of-place time (µs), 6 algbw (GB/s), 7 busbw (GB/s), 8 #wrong, 9-12 the same in place.
"""


def result_rows(path):
    """The result rows of the log at `path` as lists of fields, in the log's order; none when
    the file cannot be read (a run that did not start)."""
    try:
        with open(path, errors="replace") as log:
            lines = log.readlines()
    except OSError:
        return []
    return [f for f in (line.split() for line in lines if not line.startswith("#"))
            if len(f) >= 13 and f[0].isdigit()]
