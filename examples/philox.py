"""Philox4x32-10 (curand's default generator; Random123's ``philox4x32`` with 10 rounds) as a
Stack PTX routine library on a stack type of its own, compiled to one stub and checked against
Random123's known answers.

    python examples/philox.py         # the emulator on the CPU; on a GPU the kernel runs too

The generator's state (counter words c0..c3, key words k0, k1) lives on a ``philox`` stack
(``sp.stack_type``: u32 registers, a stack apart from the u32 one, as mm-ptx's PHILOX stack), so
its words never mix with other u32 values. The instructions on it are the u32 rows retyped
(``sp.retype``: same PTX, the philox stack): add, mul.hi, mul.lo and xor (PTX's xor works on
b32, which takes u32 registers). The site's variables are of the philox type too
(``PTX_IN(philox, c0)``). Three routines work on the state in scratch slots (counter words in
slots 0-3, key words in 4 and 5): ROUND (one Philox round), BUMP (the Weyl key increment) and
BUMPED_ROUND (BUMP then ROUND). The program stores the six inputs, runs ROUND once and
BUMPED_ROUND nine times, then loads the counter for the four outputs.
"""
from __future__ import annotations

import numpy as np

import numptx as nx
from numptx import stack_ptx as sp
from numptx.errors import NumptxError

#: Random123's Philox4x32 constants (philox.h): the round multipliers and the Weyl increments
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10

#: the stack type of the state, and the rows on it (name -> the u32/b32 row it retypes)
STACK = "philox"
ROWS = {"add.philox": ("add.u32", "u32"), "mul.hi.philox": ("mul.hi.u32", "u32"),
        "mul.lo.philox": ("mul.lo.u32", "u32"), "xor.philox": ("xor.b32", "b32")}


def define_stack() -> None:
    """Define the ``philox`` stack type and its rows (once per process; again is a no-op)."""
    sp.stack_type(STACK, "u32")
    for name, (row, t) in ROWS.items():
        if name not in nx.TABLE:
            sp.retype(row, {t: STACK}, name=name)


define_stack()
INPUTS = {"c0": STACK, "c1": STACK, "c2": STACK, "c3": STACK, "k0": STACK, "k1": STACK}
OUTPUTS = {"r0": STACK, "r1": STACK, "r2": STACK, "r3": STACK}
C, K = (0, 1, 2, 3), (4, 5)          # the scratch slots of the counter and key words
ROUND, BUMP, BUMPED_ROUND = 0, 1, 2  # routine indices

#: Random123's kat_vectors, the ``philox4x32 10`` lines: (name, counter, key, expected output)
KAT = [
    ("zeros", (0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ("ones", (0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ("pi", (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _u32(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= int(value) < 1 << 32:
        raise NumptxError(f"philox: {what} must be an int in [0, 2**32), not {value!r}")
    return int(value)


def _xor(*operands: list[sp.Op]) -> list[sp.Op]:
    """Operands (each a list of ops that pushes one philox word) -> their xor."""
    ops: list[sp.Op] = []
    for i, push in enumerate(operands):
        ops += push + ([sp.instr("xor.philox")] if i else [])
    return ops


def routines(m0: int = M0, m1: int = M1, w0: int = W0, w1: int = W1) -> list[list[sp.Op]]:
    """The routine library [ROUND, BUMP, BUMPED_ROUND] for the given constants (Random123's by
    default; other values make a different generator, which the known answers catch)."""
    m0, m1 = _u32(m0, "the multiplier m0"), _u32(m1, "the multiplier m1")
    w0, w1 = _u32(w0, "the Weyl increment w0"), _u32(w1, "the Weyl increment w1")

    def slot(i):
        return [sp.load(STACK, i)]

    def mul(half, m, i):          # mul.hi/lo of counter word i and the multiplier m
        return slot(i) + [sp.const(m, STACK), sp.instr(f"mul.{half}.philox")]

    # Random123: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2;
    #            c' = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
    round_ = (_xor(mul("hi", m1, C[2]), slot(C[1]), slot(K[0])) + mul("lo", m1, C[2])
              + _xor(mul("hi", m0, C[0]), slot(C[3]), slot(K[1])) + mul("lo", m0, C[0])
              + [sp.store(STACK, s) for s in reversed(C)])      # the new words, top first
    bump = [op for s, w in zip(K, (w0, w1))
            for op in (sp.load(STACK, s), sp.const(w, STACK), sp.instr("add.philox"),
                       sp.store(STACK, s))]
    return [round_, bump, [sp.routine(BUMP), sp.routine(ROUND)]]


def program(rounds: int = ROUNDS) -> list[sp.Op]:
    """Store the inputs, run ``rounds`` rounds (the key bumped before each but the first), load
    the counter: the first output takes the top, so c0 is pushed last."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 64:
        raise NumptxError(f"philox: rounds must be an int in [1, 64], not {rounds!r}")
    prog = [op for i, name in enumerate(INPUTS) for op in (sp.input(name), sp.store(STACK, i))]
    prog += [sp.routine(ROUND)] + [sp.routine(BUMPED_ROUND)] * (rounds - 1)
    return prog + [sp.load(STACK, s) for s in reversed(C)]


def stub(rounds: int = ROUNDS, *, site=None, **constants) -> sp.Stub:
    """The Philox stub: registers c0..c3, k0, k1 -> r0..r3, or bound to ``site`` (variables of
    those names). ``constants`` go to :func:`routines`."""
    kw = {"site": site} if site is not None else {"inputs": INPUTS, "outputs": OUTPUTS}
    return sp.compile(program(rounds), routines=routines(**constants), strict=True, **kw)


def reference(counter, key, rounds: int = ROUNDS) -> np.ndarray:
    """Philox4x32 in NumPy (uint64 products): counter (n, 4), key (n, 2) -> (n, 4) uint32."""
    c = np.array(counter, np.uint64).reshape(-1, 4).T.copy()
    k = np.array(key, np.uint64).reshape(-1, 2).T.copy()
    mask = np.uint64(0xFFFFFFFF)
    for r in range(rounds):
        if r:
            k = (k + np.array([[W0], [W1]], np.uint64)) & mask
        p0, p1 = np.uint64(M0) * c[0], np.uint64(M1) * c[2]
        c = np.stack([(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & mask,
                      (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & mask])
    return c.T.astype(np.uint32)


def emulate(st, counter, key) -> np.ndarray:
    """Run stub ``st`` with nx.emulate: counter (n, 4), key (n, 2) -> (n, 4) uint32."""
    c = np.asarray(counter, np.uint32).reshape(-1, 4)
    k = np.asarray(key, np.uint32).reshape(-1, 2)
    feeds = {f"c{i}": c[:, i] for i in range(4)} | {f"k{i}": k[:, i] for i in range(2)}
    got = nx.emulate(st, feeds, outputs=list(OUTPUTS))
    return np.stack([got[name] for name in OUTPUTS], axis=1).astype(np.uint32)


def check_kat(st) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Emulate ``st`` on the known-answer vectors: [(name, got, expected)] (uint32 arrays)."""
    got = emulate(st, [v[1] for v in KAT], [v[2] for v in KAT])
    return [(name, got[i], np.array(want, np.uint32)) for i, (name, _, _, want) in enumerate(KAT)]


GPU_SRC = r'''
extern "C" __global__ void philox(unsigned* out, const unsigned* ctr, const unsigned* key, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned c0 = ctr[4 * i], c1 = ctr[4 * i + 1], c2 = ctr[4 * i + 2], c3 = ctr[4 * i + 3];
        unsigned k0 = key[2 * i], k1 = key[2 * i + 1], r0, r1, r2, r3;
        PTX_INJECT("philox", PTX_IN(philox, c0), PTX_IN(philox, c1), PTX_IN(philox, c2),
                   PTX_IN(philox, c3), PTX_IN(philox, k0), PTX_IN(philox, k1),
                   PTX_OUT(philox, r0), PTX_OUT(philox, r1), PTX_OUT(philox, r2),
                   PTX_OUT(philox, r3));
        out[4 * i] = r0; out[4 * i + 1] = r1; out[4 * i + 2] = r2; out[4 * i + 3] = r3;
    }
}'''


def _hex(words) -> str:
    return " ".join(f"{int(w):08x}" for w in words)


def main(n_random: int = 4096, gpu: bool | None = None) -> None:
    st = stub()
    n_instr = sum(1 for line in st.splitlines() if not line.startswith((".reg", "{", "}")))
    print(f"Philox4x32-{ROUNDS} on the {STACK!r} stack type: 3 routines, {len(program())} "
          f"program ops -> one stub of {n_instr} PTX lines")

    # 1. Random123's known answers, through the emulator
    results = check_kat(st)
    for name, got, want in results:
        print(f"  KAT {name:<5} got {_hex(got)}  expected {_hex(want)}  "
              f"{'ok' if np.array_equal(got, want) else 'MISMATCH'}")
    bad = [name for name, got, want in results if not np.array_equal(got, want)]
    if bad:
        raise SystemExit(f"philox: the known-answer vectors {bad} do not match")

    # 2. random counters and keys: the emulated stub against the NumPy reference
    rng = np.random.default_rng(123)
    ctr = rng.integers(0, 1 << 32, (n_random, 4), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 1 << 32, (n_random, 2), dtype=np.uint64).astype(np.uint32)
    expected = reference(ctr, key)
    assert np.array_equal(emulate(st, ctr, key), expected)
    print(f"  emulator == NumPy reference on {n_random} random counters/keys")

    # 3. a wrong constant changes the numbers: the check compares, it does not just run
    wrong = check_kat(stub(m0=M0 ^ 1))
    assert not any(np.array_equal(got, want) for _, got, want in wrong)
    print("  a corrupted multiplier (m0 ^ 1) fails all known answers, as it should")

    # 4. the stub in a kernel: assembled here, run where there is a GPU
    tmpl = nx.CudaTemplate(GPU_SRC, entry="philox", arch="sm_90", cache=None)
    v = tmpl.inject(philox=stub(site=tmpl.sites["philox"]))
    print(f"  kernel variant assembled: {len(v.cubin)} bytes of cubin")
    if gpu is None:                  # the simulator runs no CUDA C++: a GPU only
        from numba import cuda
        gpu = bool(cuda.is_available()) and not nx.simulator_active()
    if not gpu:
        print("  no CUDA GPU: the kernel was built, not launched")
        return
    all_ctr = np.concatenate([np.array([k[1] for k in KAT], np.uint32), ctr])
    all_key = np.concatenate([np.array([k[2] for k in KAT], np.uint32), key])
    n = len(all_ctr)
    flat = np.zeros(4 * n, np.uint32)             # host arrays: copied there and back
    v[(n + 127) // 128, 128](flat, all_ctr.ravel(), all_key.ravel(), n)
    out = flat.reshape(n, 4)
    assert np.array_equal(out[:len(KAT)], np.array([k[3] for k in KAT], np.uint32)), out[:len(KAT)]
    assert np.array_equal(out[len(KAT):], expected)
    print(f"  GPU kernel == known answers and NumPy reference on {n} counters")


if __name__ == "__main__":
    main()
