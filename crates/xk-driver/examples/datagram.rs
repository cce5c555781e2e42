//! Datagrams: one unacknowledged (service 1) and one acknowledged
//! (service 2), received by a listener.
//!
//! `cargo run -p xk-driver --example datagram`

use std::time::Duration;

use xk_driver::api::{XtpListener, send_datagram};

fn main() -> std::io::Result<()> {
    // The listener and its streams are single-threaded (`!Send`): the
    // server thread makes its own and tells the client where it is.
    let (tell, where_) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut listener = XtpListener::bind("127.0.0.1:0", 9)?;
        tell.send(listener.local_addr()?).expect("main waits");
        for _ in 0..2 {
            let (peer, data) = listener.recv_datagram(Some(Duration::from_secs(10)))?;
            println!("server: {:?} from {peer}", String::from_utf8_lossy(&data));
        }
        Ok(())
    });
    let addr = where_.recv().expect("server started");
    send_datagram(addr, 9, b"fire and forget", false, Duration::from_secs(5))?;
    send_datagram(addr, 9, b"acknowledged, please", true, Duration::from_secs(5))?;
    println!("client: the acknowledged datagram was acknowledged");
    server.join().expect("server thread")?;
    Ok(())
}
