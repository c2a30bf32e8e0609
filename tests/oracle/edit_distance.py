"""Levenshtein distance of two sequences (strings, lists of labels): the character error rates of
tests/oracle/ocr_pipeline.py, the greedy CTC readings tests/e2e/compare.sh checks ptq's
seq-chars against, and bench/experiments. No imports, so any Python can use it."""


def levenshtein(a, b):
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
