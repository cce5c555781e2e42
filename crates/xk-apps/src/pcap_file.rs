//! A pcap file that can be read while the run goes on: writes go to a
//! buffer (one capture record per packet must not cost a system call), and
//! a background thread flushes it every half second, so `tshark -r` or a
//! tail of the file sees what crossed within a second — also the last
//! packets of a transfer that has gone quiet, which a flush triggered by
//! the next packet would hold back until exit.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use xtp_wire::pcap::PcapWriter;

/// How often the buffer reaches the file.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The buffered file, shared with the thread that flushes it; the thread
/// ends when the last writer is dropped.
pub struct LiveFile(Arc<Mutex<BufWriter<File>>>);

impl Write for LiveFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("capture file lock poisoned"))?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.lock().map_err(|_| std::io::Error::other("capture file lock poisoned"))?.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().map_err(|_| std::io::Error::other("capture file lock poisoned"))?.flush()
    }
}

impl Drop for LiveFile {
    fn drop(&mut self) {
        if let Ok(mut w) = self.0.lock() {
            let _ = w.flush();
        }
    }
}

/// Creates `path` as a pcap capture flushed every half second; errors name
/// `--pcap` and the file.
pub fn create(path: &Path) -> Result<PcapWriter<LiveFile>, String> {
    let what = format!("--pcap {}", path.display());
    let f = File::create(path).map_err(|e| format!("{what}: {e}"))?;
    let shared = Arc::new(Mutex::new(BufWriter::new(f)));
    let weak: Weak<Mutex<BufWriter<File>>> = Arc::downgrade(&shared);
    std::thread::Builder::new()
        .name("pcap-flush".into())
        .spawn(move || {
            loop {
                std::thread::sleep(FLUSH_EVERY);
                let Some(w) = weak.upgrade() else { return };
                if let Ok(mut w) = w.lock() {
                    let _ = w.flush();
                }
            }
        })
        .map_err(|e| format!("{what}: {e}"))?;
    PcapWriter::new(LiveFile(shared)).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reaches_the_file_within_a_second_without_more_traffic() {
        let path = std::env::temp_dir().join(format!("xk-apps-live-{}.pcap", std::process::id()));
        let mut w = create(&path).unwrap();
        w.write_packet(1, std::net::Ipv4Addr::LOCALHOST, std::net::Ipv4Addr::LOCALHOST, &[0u8; 100]).unwrap();
        let want = 24 + 16 + 20 + 100;
        let t0 = std::time::Instant::now();
        while std::fs::metadata(&path).unwrap().len() < want {
            assert!(t0.elapsed() < Duration::from_secs(2), "not flushed while the writer lives");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(w);
        let _ = std::fs::remove_file(&path);
    }
}
