"""compare.py A.npy B.npy [--cos MIN] [--rel MAX]: cosine and max-abs error of A against
B (the reference), max-abs as a fraction of B's range. Prints one line; exits 1 when a
bound is given and not met."""
import sys
import numpy as np

a = np.load(sys.argv[1]).astype(np.float64)
b = np.load(sys.argv[2]).astype(np.float64)
args = sys.argv[3:]
bounds = {args[i]: float(args[i + 1]) for i in range(0, len(args), 2)}
if a.shape != b.shape:
    print(f"shape {a.shape} != reference {b.shape}")
    sys.exit(1)
a, b = a.ravel(), b.ravel()
den = np.sqrt((a @ a) * (b @ b))
cos = float(a @ b / den) if den > 0 else float(np.array_equal(a, b))
err = float(np.abs(a - b).max()) if a.size else 0.0
rng = float(b.max() - b.min()) if b.size else 0.0
rel = err / rng if rng > 0 else err
ok = cos >= bounds.get("--cos", -2) and rel <= bounds.get("--rel", np.inf)
print(f"cosine {cos:.9f}, max-abs {err:.3g} = {rel:.3g} x range {rng:.3g}{'' if ok else '  FAIL'}")
sys.exit(0 if ok else 1)
