"""Stack PTX: a program of typed-stack instructions -> a PTX stub, checked on the CPU with the
emulator, then bound to a site, injected and assembled.

    python examples/stack_ptx_example.py
"""
import numpy as np

import numptx as nx
from numptx import stack_ptx as sp

SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        out[i] = z;
    }
}'''


def main() -> None:
    # z = x * y + 1, in postfix order
    prog = [sp.input("x"), sp.input("y"), sp.instr("mul.rn.f32"),
            sp.const(1.0, "f32"), sp.instr("add.rn.f32")]
    stub = sp.compile(prog, inputs={"x": "f32", "y": "f32"}, outputs={"z": "f32"})
    print(stub)
    got = nx.emulate(stub, {"x": np.float32([2, 3]), "y": np.float32([4, 5])}, outputs=["z"])
    assert got["z"].tolist() == [9.0, 16.0]

    # every mutation is still a valid program: missing operands make an instruction a no-op
    mutated = prog[:2] + [sp.instr("sqrt.rn.f32"), sp.dup("f32"), sp.instr("fma.rn.f32")]
    print(sp.compile(mutated, {"x": "f32", "y": "f32"}, {"z": "f32"}).diagnostics)

    # bind to a site of a template: inputs and outputs come from its variables
    inj = nx.PtxInject(nx.cuda_to_ptx(SRC, arch="sm_90"))
    site_stub = sp.compile(prog, site=inj.sites["combine"])
    cubin = nx.ptx_to_cubin(inj.render({"combine": site_stub}), arch="sm_90")
    print(f"assembled {len(cubin)} bytes")

    # a batch of programs (uint64-encoded, as an evolutionary search keeps them)
    rng = np.random.default_rng(0)
    pool = [sp.input("x"), sp.input("y"), sp.const(0.5, "f32"), sp.instr("add.rn.f32"),
            sp.instr("mul.rn.f32"), sp.instr("max.f32"), sp.dup("f32"), sp.swap("f32")]
    population = [sp.encode([pool[i] for i in rng.integers(0, len(pool), 30)], ["x", "y"])
                  for _ in range(1000)]
    stubs = sp.compile_many(population, inputs={"x": "f32", "y": "f32"}, outputs={"z": "f32"})
    print(f"compiled {len(stubs)} programs; the first:\n{stubs[0]}")

    # programs serialize to versioned, checksummed bytes
    assert sp.loads(sp.dumps(prog)) == prog


if __name__ == "__main__":
    main()
