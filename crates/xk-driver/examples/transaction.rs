//! A transaction (service 3): one request, one response, no separate
//! connection set-up or tear-down exchange.
//!
//! `cargo run -p xk-driver --example transaction`

use std::io::{Read, Write};
use std::time::Duration;

use xk_driver::api::{XtpListener, transaction};

fn main() -> std::io::Result<()> {
    // The listener and its streams are single-threaded (`!Send`): the
    // server thread makes its own and tells the client where it is.
    let (tell, where_) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut listener = XtpListener::bind("127.0.0.1:0", 53)?;
        tell.send(listener.local_addr()?).expect("main waits");
        let (mut s, peer, service) = listener.accept_timeout(Some(Duration::from_secs(10)))?;
        let mut request = Vec::new();
        s.read_to_end(&mut request)?;
        println!("server: {service:?} from {peer}: {:?}", String::from_utf8_lossy(&request));
        s.write_all(format!("answer to {}", String::from_utf8_lossy(&request)).as_bytes())?;
        s.close()
    });
    let addr = where_.recv().expect("server started");
    let response = transaction(addr, 53, b"what time is it?", Duration::from_secs(10))?;
    println!("client: {:?}", String::from_utf8_lossy(&response));
    server.join().expect("server thread")?;
    Ok(())
}
