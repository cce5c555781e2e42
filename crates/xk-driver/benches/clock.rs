//! What a driver tracepoint adds to `xk_trace::record`: reading the clock
//! (`trace::mono_ns`, `CLOCK_MONOTONIC` through the vDSO), per call, over
//! 10 million calls, three times.

fn main() {
    const N: u32 = 10_000_000;
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        for _ in 0..N {
            x = x.wrapping_add(xk_driver::trace::mono_ns());
        }
        let ns = t0.elapsed().as_nanos() as f64 / f64::from(N);
        println!("trace clock (mono_ns): {ns:.1} ns per read (checksum {})", x % 7);
    }
}
