//! The one module with `unsafe`: a `memfd` mapped shared into this process,
//! and the accesses to it.
//!
//! The segment is shared with another process that may be buggy or
//! hostile. So nothing here hands out a Rust reference to plain data in the
//! segment except through [`View`] (see its note), reads and writes are
//! bounds-checked copies, and the words both sides change are atomics.
//! Offsets come from this crate's own layout, never from the other
//! process: a bad offset is a bug here, and panics.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};

use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};

/// A shared-memory segment: a `memfd` and its mapping in this process.
pub struct Segment {
    base: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory, valid until `Drop`; every
// access goes through atomics or bounds-checked copies, which any thread
// may do (the other process does them concurrently anyway).
unsafe impl Send for Segment {}
// SAFETY: as for `Send`: no method gives out `&mut` to the memory.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a zero-filled segment of `len` bytes (`memfd_create`, sealed
    /// against shrinking so the other side cannot make our mapping fault).
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
        nix::unistd::ftruncate(&fd, len as i64)?;
        nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_ADD_SEALS(
                nix::fcntl::SealFlag::F_SEAL_SHRINK
                    | nix::fcntl::SealFlag::F_SEAL_GROW
                    | nix::fcntl::SealFlag::F_SEAL_SEAL,
            ),
        )?;
        Segment::map(fd, len)
    }

    /// Maps a segment received from another process; its size is the
    /// file's. Refuses a file that is not sealed against shrinking (a
    /// truncation would turn our accesses into SIGBUS).
    pub fn open(fd: OwnedFd) -> io::Result<Segment> {
        let seals = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GET_SEALS)?;
        if seals & nix::fcntl::SealFlag::F_SEAL_SHRINK.bits() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared segment not sealed against shrinking",
            ));
        }
        let st = nix::sys::stat::fstat(&fd)?;
        Segment::map(fd, st.st_size as usize)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<Segment> {
        let Some(nz) = NonZeroUsize::new(len) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty shared segment"));
        };
        // SAFETY: a fresh shared mapping of a file we hold; no Rust object
        // aliases it. mmap returns a page-aligned, `len`-byte region or fails.
        let p = unsafe {
            mmap(None, nz, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::MAP_SHARED, &fd, 0)
        }?;
        Ok(Segment { base: p.cast(), len, fd })
    }

    /// The segment's file (to pass to the other process).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes (never: `map` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: usize, n: usize, align: usize) {
        assert!(
            off.is_multiple_of(align) && off.checked_add(n).is_some_and(|e| e <= self.len),
            "segment offset {off}+{n}"
        );
    }

    /// The 64-bit atomic word at `off` (8-aligned, inside the segment).
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        self.check(off, 8, 8);
        // SAFETY: in bounds and aligned (checked; the base is page-aligned);
        // the memory lives as long as `self`; atomics may be shared with
        // anyone, including another process, and every bit pattern is a
        // valid u64.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// The 32-bit atomic word at `off` (4-aligned, inside the segment).
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.check(off, 4, 4);
        // SAFETY: as for `u64_at`.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// Copies `dst.len()` bytes from `off` out of the segment.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len(), 1);
        // SAFETY: the source range is inside the mapping (checked) and
        // cannot overlap `dst`, which is ours. The other process may write
        // it meanwhile: we then copy whatever bytes are there, which is
        // fine for `u8`s (no invalid values); the protocol above (the ring)
        // makes it not happen for a well-behaved peer.
        unsafe { std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` into the segment at `off`.
    pub fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len(), 1);
        // SAFETY: in bounds (checked), no overlap with `src`; no Rust
        // reference to this range exists (views cover only ranges the ring
        // protocol has handed to the reader, which this side does not write).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(off), src.len()) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `map`; no `View`
        // outlives the segment (each holds an `Arc` of it).
        let _ = unsafe { munmap(self.base.cast::<c_void>(), self.len) };
    }
}

/// A read-only window on bytes in a segment, given to [`bytes::Bytes`] as
/// its owner (zero copy), and a callback when the last clone is dropped.
///
/// While a view lives, the ring protocol keeps the writer off its range
/// (the reader releases it only on drop). The writer is another process:
/// if it breaks the protocol and writes anyway, the holder of the view sees
/// different bytes, nothing worse — the holder only copies them (into
/// packets, or into the application's buffer) and never relies on them for
/// memory safety. This is how shared-memory transports (Aeron's log
/// buffers) work; we accept it for the one copy it saves per message.
pub struct View {
    seg: Arc<Segment>,
    off: usize,
    len: usize,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl View {
    /// A view of `len` bytes at `off` (inside the segment); `on_drop`
    /// runs when it is dropped.
    pub fn new(seg: Arc<Segment>, off: usize, len: usize, on_drop: Box<dyn FnOnce() + Send>) -> View {
        seg.check(off, len, 1);
        View { seg, off, len, on_drop: Some(on_drop) }
    }
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: in bounds (checked in `new`), alive while `seg` is; see
        // the type's note on writes by the other process.
        unsafe { std::slice::from_raw_parts(self.seg.base.as_ptr().add(self.off), self.len) }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn create_write_read_and_reopen_through_the_fd() {
        let a = Segment::create("xk-shm-test", 8192).unwrap();
        a.write(100, b"hello");
        a.u64_at(8).store(42, Ordering::SeqCst);
        let b = Segment::open(a.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(b.len(), 8192);
        let mut got = [0u8; 5];
        b.read(100, &mut got);
        assert_eq!(&got, b"hello");
        assert_eq!(b.u64_at(8).load(Ordering::SeqCst), 42);
    }

    #[test]
    #[should_panic(expected = "segment offset")]
    fn out_of_bounds_is_refused() {
        let a = Segment::create("xk-shm-test", 4096).unwrap();
        a.write(4094, b"abc");
    }

    #[test]
    fn a_view_runs_its_callback_once_when_the_last_bytes_clone_goes() {
        let seg = Arc::new(Segment::create("xk-shm-test", 4096).unwrap());
        seg.write(0, b"abcdef");
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        let v = View::new(
            seg.clone(),
            1,
            4,
            Box::new(move || {
                h.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let b = bytes::Bytes::from_owner(v);
        let c = b.slice(1..3);
        assert_eq!(&b[..], b"bcde");
        drop(b);
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        assert_eq!(&c[..], b"cd");
        drop(c);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
