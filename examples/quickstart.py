"""Quick start: annotate a CUDA kernel, compile it once, inject a stub, assemble a variant.

    python examples/quickstart.py
"""
import numptx as nx

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
    ptx = nx.cuda_to_ptx(SRC, arch="sm_90")          # NVRTC, once per template
    inj = nx.PtxInject(ptx)
    site = inj.sites["combine"]
    print(site)
    x, y, z = site["x"], site["y"], site["z"]
    stub = f"add.ftz.f32 %{z.reg}, %{x.reg}, %{y.reg};"
    cubin = nx.ptx_to_cubin(inj.render({"combine": stub}), arch="sm_90")   # nvJitLink, per variant
    print(f"variant assembled: {len(cubin)} bytes of cubin")


if __name__ == "__main__":
    main()
