//! The processor's time-stamp counter: the cheap tick a tracepoint's
//! timestamp can be made from (`RDTSC`, a few nanoseconds, against
//! ~28 ns for `clock_gettime` through the vDSO here). Ticks are not
//! nanoseconds: the caller calibrates them against `CLOCK_MONOTONIC`
//! (`xk_driver::trace`), and uses them only where the kernel itself
//! trusts the counter (its clock source is `tsc`: invariant and in step on
//! every processor).

/// The time-stamp counter, or `None` on a processor without one this
/// crate reads.
#[inline(always)]
pub fn cycles() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter into registers: it touches no
        // memory and exists on every x86-64 processor. (Rust declares all
        // `core::arch` intrinsics unsafe.)
        #[allow(unsafe_code)]
        let t = unsafe { core::arch::x86_64::_rdtsc() };
        Some(t)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cycles_advance() {
        if let Some(a) = super::cycles() {
            let mut b = a;
            for _ in 0..1_000_000 {
                b = super::cycles().unwrap();
                if b > a {
                    break;
                }
            }
            assert!(b > a);
        }
    }
}
