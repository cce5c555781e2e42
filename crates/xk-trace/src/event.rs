//! The event record and the typed tracepoints.

/// The layer a tracepoint belongs to: one Perfetto track per layer and
/// thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Layer {
    /// The application's calls (blocking API).
    App,
    /// Ring crossings between the application and the engine thread or
    /// daemon.
    Ring,
    /// The XTP engine (`xtp-proto`).
    Engine,
    /// The socket driver: system calls.
    Driver,
    /// The link emulator.
    Emu,
}

impl Layer {
    /// Lower-case name (exports).
    pub fn name(self) -> &'static str {
        match self {
            Layer::App => "app",
            Layer::Ring => "ring",
            Layer::Engine => "engine",
            Layer::Driver => "driver",
            Layer::Emu => "emu",
        }
    }
}

/// Instant, or the beginning or end of a span (a phase of an operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Phase {
    /// A point in time.
    Instant,
    /// A span begins (closed by the next `End` of the same point on the
    /// same thread).
    Begin,
    /// A span ends.
    End,
}

/// The tracepoints. What `a` and `b` of an [`Event`] mean is given per
/// point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Point {
    /// Application write call (span). a: bytes, b: 1 if it ends a message.
    AppWrite,
    /// Application read call (span). a: bytes returned.
    AppRead,
    /// A block pushed into a ring. a: record count on that ring, b: ring
    /// (0 towards the engine, 1 from it).
    RingPush,
    /// A block taken from a ring. a, b as for `RingPush`.
    RingPop,
    /// The engine queued application data. a: seq, b: bytes.
    Write,
    /// A journey goes on under another id: the ring block (`journey`)
    /// the engine wrote as the data whose journey is `a` (flow, seq).
    Link,
    /// The application took data from the engine. a: seq, b: bytes.
    Read,
    /// The engine built a packet. a: seq, b: user data bytes.
    PacketSent,
    /// The engine accepted a packet. a: seq, b: packet type code.
    PacketReceived,
    /// The engine dropped a packet. b: reason code.
    PacketDropped,
    /// Data sent again. a: seq, b: bytes.
    Retransmit,
    /// A context changed state. a: context, b: new state code.
    StateChange,
    /// A timer fired. a: context, b: timer code.
    Timer,
    /// A congestion-control decision changed the window. a: window
    /// (bytes), b: cause ([`cause`]).
    Window,
    /// A congestion-control decision changed the slow-start threshold
    /// (recorded beside its `Window` event, only when the threshold
    /// moved). a: threshold (bytes; `u64::MAX`: none), b: cause.
    Ssthresh,
    /// A rate-control decision: the pacing rate changed, or a packet waits
    /// for rate control. a: rate (wire bytes/s, 0 unpaced), b: wait (ns,
    /// saturating; 0: nothing waits).
    Rate,
    /// A flow-control decision: the peer's allocation advanced. a: the
    /// allocation edge (sequence number), b: bytes it lets us send beyond
    /// the acknowledged (saturating).
    FlowWindow,
    /// The engine builds a packet (span, checksum included). a: packet
    /// bytes.
    PacketBuild,
    /// The engine parses an arrived datagram (span, checksum included).
    /// a: datagram bytes.
    PacketParse,
    /// A checksum is computed (b: 0) or verified (b: 1) (span). a: bytes.
    Checksum,
    /// An RTT sample. a: context, b: sample in ns (saturating).
    Rtt,
    /// Send system call (span: one driver flush, one or more system calls).
    /// a: datagrams, b: bytes.
    SendCall,
    /// Receive system call (span). a: datagrams (with GRO: the segments of
    /// the one coalesced datagram read, the GRO train), b: bytes.
    RecvCall,
    /// One GSO super-datagram the kernel took (instant, inside a
    /// `SendCall`). a: segments (the GSO train), b: bytes.
    GsoTrain,
    /// A thread blocks waiting (span: the `ppoll` that sleeps — the engine
    /// thread's park on its doorbell and socket, or the integrated mode's
    /// and the application's wait). a: the timeout asked (ns, saturating;
    /// `u64::MAX`: none), b: what woke it ([`wake`] bits; a timeout is
    /// [`wake::TIMER`]; 0 only when `ppoll` failed with an error other
    /// than `EINTR`).
    Park,
    /// A doorbell rung: the eventfd write that wakes the other side of a
    /// ring, which had parked for what was made available (instant, on the
    /// waker's thread). a: what the sleeper waited for (its `parked` bits,
    /// as the ring's swap took them; a superset of what the waker made
    /// available when the sleeper waited for more than one thing).
    Bell,
    /// The emulator took a datagram in. a: bytes.
    EmuArrive,
    /// The emulator released a datagram. a: bytes.
    EmuRelease,
}

impl Point {
    /// Every point, in order.
    pub const ALL: [Point; 28] = [
        Point::AppWrite,
        Point::AppRead,
        Point::RingPush,
        Point::RingPop,
        Point::Write,
        Point::Link,
        Point::Read,
        Point::PacketSent,
        Point::PacketReceived,
        Point::PacketDropped,
        Point::Retransmit,
        Point::StateChange,
        Point::Timer,
        Point::Window,
        Point::Ssthresh,
        Point::Rate,
        Point::FlowWindow,
        Point::PacketBuild,
        Point::PacketParse,
        Point::Checksum,
        Point::Rtt,
        Point::SendCall,
        Point::RecvCall,
        Point::GsoTrain,
        Point::Park,
        Point::Bell,
        Point::EmuArrive,
        Point::EmuRelease,
    ];

    /// The layer it belongs to.
    pub fn layer(self) -> Layer {
        match self {
            Point::AppWrite | Point::AppRead => Layer::App,
            Point::RingPush | Point::RingPop => Layer::Ring,
            Point::SendCall | Point::RecvCall | Point::GsoTrain | Point::Park | Point::Bell => Layer::Driver,
            Point::EmuArrive | Point::EmuRelease => Layer::Emu,
            _ => Layer::Engine,
        }
    }

    /// snake_case name (exports).
    pub fn name(self) -> &'static str {
        match self {
            Point::AppWrite => "app_write",
            Point::AppRead => "app_read",
            Point::RingPush => "ring_push",
            Point::RingPop => "ring_pop",
            Point::Write => "write",
            Point::Link => "link",
            Point::Read => "read",
            Point::PacketSent => "packet_sent",
            Point::PacketReceived => "packet_received",
            Point::PacketDropped => "packet_dropped",
            Point::Retransmit => "retransmit",
            Point::StateChange => "state_change",
            Point::Timer => "timer",
            Point::Window => "window",
            Point::Ssthresh => "ssthresh",
            Point::Rate => "rate",
            Point::FlowWindow => "flow_window",
            Point::PacketBuild => "packet_build",
            Point::PacketParse => "packet_parse",
            Point::Checksum => "checksum",
            Point::Rtt => "rtt",
            Point::SendCall => "send_call",
            Point::RecvCall => "recv_call",
            Point::GsoTrain => "gso_train",
            Point::Park => "park",
            Point::Bell => "bell",
            Point::EmuArrive => "emu_arrive",
            Point::EmuRelease => "emu_release",
        }
    }
}

/// Cause codes of [`Point::Window`] and [`Point::Ssthresh`] (their `b`).
pub mod cause {
    /// An acknowledgement (growth, a model update).
    pub const ACK: u32 = 0;
    /// A loss began a congestion episode.
    pub const LOSS: u32 = 1;
    /// The retransmission timer ran out.
    pub const TIMEOUT: u32 = 2;
    /// A spurious reduction undone.
    pub const UNDO: u32 = 3;
}

/// What ended a [`Point::Park`] (its `b`, bits; several can hold).
pub mod wake {
    /// The sleeper's doorbell (eventfd) was readable: the other side rang.
    pub const BELL: u32 = 1;
    /// A socket was readable: a datagram waits.
    pub const SOCKET: u32 = 2;
    /// The timeout passed (`ppoll` returned 0): the sleeper's timer.
    pub const TIMER: u32 = 4;
    /// A signal interrupted the wait (`EINTR`).
    pub const INTERRUPTED: u32 = 8;
}

/// One tracepoint hit: 32 bytes, plain data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds on `CLOCK_MONOTONIC`, given by the caller.
    pub t: u64,
    /// The journey this event belongs to ([`journey`]); 0: none.
    pub journey: u64,
    /// First argument (meaning per [`Point`]).
    pub a: u64,
    /// Second argument (meaning per [`Point`]).
    pub b: u32,
    /// Which tracepoint.
    pub point: Point,
    /// Instant or span edge.
    pub phase: Phase,
}

impl Event {
    /// An instant event.
    #[inline]
    pub fn instant(t: u64, point: Point, journey: u64, a: u64, b: u32) -> Event {
        Event { t, journey, a, b, point, phase: Phase::Instant }
    }

    /// A span's beginning.
    #[inline]
    pub fn begin(t: u64, point: Point, journey: u64, a: u64, b: u32) -> Event {
        Event { t, journey, a, b, point, phase: Phase::Begin }
    }

    /// A span's end.
    #[inline]
    pub fn end(t: u64, point: Point, journey: u64, a: u64, b: u32) -> Event {
        Event { t, journey, a, b, point, phase: Phase::End }
    }
}

/// The journey id of the item `seq` of `stream`: a hash (SplitMix64's
/// finaliser) of the two, never 0 (0 means "no journey"). Both sides of a
/// hand-off compute it from what they already know — an XTP flow and a
/// byte's sequence number, a ring and its record count — so nothing is
/// added to packets or ring records.
#[inline]
pub fn journey(stream: u64, seq: u64) -> u64 {
    let mut z = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seq;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    if z == 0 { 1 } else { z }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_is_small_and_journeys_differ() {
        assert_eq!(std::mem::size_of::<Event>(), 32);
        assert_ne!(journey(1, 0), journey(1, 1));
        assert_ne!(journey(1, 0), journey(2, 0));
        assert_eq!(journey(7, 9), journey(7, 9));
        assert!(Point::ALL.iter().all(|p| journey(p.layer() as u64, 0) != 0));
        let names: std::collections::BTreeSet<_> = Point::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Point::ALL.len());
    }
}
