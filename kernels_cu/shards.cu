// Data-parallel shards (gpumcmc/shards.py): copies between GPUs that order
// only on the receiving GPU's stream.
//
// A copy made with cudaMemcpy(Peer)Async on the legacy default stream also
// waits for the sending GPU's queued work. Shards.Replica orders a copy after
// an event recorded on the sending GPU, and wants nothing more: this kernel
// runs on the receiving GPU and reads the sender's memory over the link
// (peer access enabled), so GPU 0's later work does not hold the copy back.

extern "C" __global__ void peer_copy(const unsigned long long src_addr, unsigned long long* __restrict__ dst,
                                     const long long words) {
    const unsigned long long* __restrict__ src = reinterpret_cast<const unsigned long long*>(src_addr);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words;
         i += (long long)gridDim.x * blockDim.x) {
        dst[i] = src[i];
    }
}
