//! The sm_90a part of the tilec prelude: TMA, mbarriers and warp specialization.
// Printed after the prelude only for kernels that take a tensor map or use one of these statements,
// so that other kernels still compile for sm_80. Barriers are 64-bit shared-memory words passed by
// pointer; every instruction takes their 32-bit shared address. All of them clobber memory, so the
// compiler keeps ordinary loads and stores of the data they guard on the right side of them.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "this tilec kernel needs sm_90a: it uses TMA, mbarrier waits, setmaxnreg, named barriers or griddepcontrol"
#endif

// The driver's CUtensorMap (cuda.h is not included): 128 opaque bytes that cuTensorMapEncodeTiled
// fills on the host. Kernels take it as a `const __grid_constant__` parameter, whose address is a
// generic address of parameter space that TMA instructions accept.
struct __align__(64) tl_tensor_map {
    unsigned long long opaque[16];
};

// Initialises the barrier for `count` arrivals per phase, then makes the initialisation visible to
// the async proxy (TMA completes its transactions through that proxy).
__device__ __forceinline__ void tl_mbarrier_init(unsigned long long* barrier, unsigned int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(tl_shared_address(barrier)), "r"(count)
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void tl_mbarrier_inval(unsigned long long* barrier) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(tl_shared_address(barrier)) : "memory");
}
__device__ __forceinline__ void tl_mbarrier_arrive(unsigned long long* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(tl_shared_address(barrier)) : "memory");
}
// Arrives and raises the phase's pending transaction count by `bytes`, which TMA loads then complete.
__device__ __forceinline__ void tl_mbarrier_arrive_expect_tx(unsigned long long* barrier, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :
                 : "r"(tl_shared_address(barrier)), "r"(bytes)
                 : "memory");
}
// Spins until the phase of parity `parity` has completed. try_wait may give up after a
// hardware-defined time, hence the loop; `%=` makes the labels unique to each inlined copy.
__device__ __forceinline__ void tl_mbarrier_expect_tx(unsigned long long* barrier, unsigned int bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
                 ::"r"(tl_shared_address(barrier)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void tl_mbarrier_wait(unsigned long long* barrier, unsigned int parity) {
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "TL_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra TL_DONE_%=;\n"
        "bra TL_WAIT_%=;\n"
        "TL_DONE_%=:\n"
        "}\n"
        :
        : "r"(tl_shared_address(barrier)), "r"(parity)
        : "memory");
}

// One box of a tensor map into shared memory, its bytes completing on `barrier`. Coordinates are
// element indices, innermost dimension first; one helper per rank because the coordinate list is
// part of the instruction.
__device__ __forceinline__ unsigned long long tl_tensor_map_address(const tl_tensor_map* map) {
    return reinterpret_cast<unsigned long long>(map);
}
__device__ __forceinline__ void tl_tma_load_1d(void* dst, const tl_tensor_map* map, unsigned long long* barrier,
                                               int c0) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3}], [%2];"
                 :
                 : "r"(tl_shared_address(dst)), "l"(tl_tensor_map_address(map)),
                   "r"(tl_shared_address(barrier)), "r"(c0)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_load_2d(void* dst, const tl_tensor_map* map, unsigned long long* barrier,
                                               int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :
                 : "r"(tl_shared_address(dst)), "l"(tl_tensor_map_address(map)),
                   "r"(tl_shared_address(barrier)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_load_3d(void* dst, const tl_tensor_map* map, unsigned long long* barrier,
                                               int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];"
                 :
                 : "r"(tl_shared_address(dst)), "l"(tl_tensor_map_address(map)),
                   "r"(tl_shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_load_4d(void* dst, const tl_tensor_map* map, unsigned long long* barrier,
                                               int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];"
                 :
                 : "r"(tl_shared_address(dst)), "l"(tl_tensor_map_address(map)),
                   "r"(tl_shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_load_5d(void* dst, const tl_tensor_map* map, unsigned long long* barrier,
                                               int c0, int c1, int c2, int c3, int c4) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
                 :
                 : "r"(tl_shared_address(dst)), "l"(tl_tensor_map_address(map)),
                   "r"(tl_shared_address(barrier)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
                 : "memory");
}

// One box of shared memory, stored as a TMA load lands it, into a tensor map's tensor (elements
// outside the tensor are not written), then the thread's bulk group committed. The async proxy
// reads the box later: the issuing thread waits with tl_tma_store_wait before it is written again.
__device__ __forceinline__ void tl_tma_store_1d(const tl_tensor_map* map, const void* src, int c0) {
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];\n"
                 "cp.async.bulk.commit_group;"
                 :
                 : "l"(tl_tensor_map_address(map)), "r"(tl_shared_address(src)), "r"(c0)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_store_2d(const tl_tensor_map* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 "cp.async.bulk.commit_group;"
                 :
                 : "l"(tl_tensor_map_address(map)), "r"(tl_shared_address(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_store_3d(const tl_tensor_map* map, const void* src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 "cp.async.bulk.commit_group;"
                 :
                 : "l"(tl_tensor_map_address(map)), "r"(tl_shared_address(src)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_store_4d(const tl_tensor_map* map, const void* src, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
                 "cp.async.bulk.commit_group;"
                 :
                 : "l"(tl_tensor_map_address(map)), "r"(tl_shared_address(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_store_5d(const tl_tensor_map* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n"
                 "cp.async.bulk.commit_group;"
                 :
                 : "l"(tl_tensor_map_address(map)), "r"(tl_shared_address(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
                 : "memory");
}
// Waits until every TMA store this thread committed has read its shared box.
__device__ __forceinline__ void tl_tma_store_wait() {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Moves registers between the warpgroups of different roles; the count is an immediate.
template <int Count>
__device__ __forceinline__ void tl_setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Count));
}
template <int Count>
__device__ __forceinline__ void tl_setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Count));
}
// Programmatic dependent launch: waits for the grids this one depends on (a launch without such a
// dependency returns at once), and lets the grids that depend on this one start.
__device__ __forceinline__ void tl_griddepcontrol_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void tl_griddepcontrol_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// A barrier among the `threads` threads that execute it, for one role of a warp-specialized kernel.
__device__ __forceinline__ void tl_named_barrier(unsigned int id, unsigned int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Counts the executing threads towards barrier `id` without waiting for it to complete.
__device__ __forceinline__ void tl_named_barrier_arrive(unsigned int id, unsigned int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// ---- end of the sm_90a prelude ----------------------------------------------------------------
