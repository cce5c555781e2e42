//! A byte stream over XTP: a listener echoes what it reads; the client writes
//! 1 MB, closes its side and reads the echo back.
//!
//! `cargo run -p xk-driver --example stream`

use std::io::{Read, Write};

use xk_driver::api::{XtpListener, XtpStream};

fn main() -> std::io::Result<()> {
    // The listener and its streams are single-threaded (`!Send`): the
    // server thread makes its own and tells the client where it is.
    let (tell, where_) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut listener = XtpListener::bind("127.0.0.1:0", 7)?;
        tell.send(listener.local_addr()?).expect("main waits");
        let (mut s, peer) = listener.accept()?;
        let mut data = Vec::new();
        s.read_to_end(&mut data)?;
        s.write_all(&data)?;
        s.close()?;
        println!("server: echoed {} bytes to {peer}", data.len());
        Ok(())
    });
    let addr = where_.recv().expect("server started");
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut s = XtpStream::connect(addr, 7)?;
    s.write_all(&data)?;
    s.shutdown_write()?;
    let mut back = Vec::new();
    s.read_to_end(&mut back)?;
    s.close()?;
    assert_eq!(back, data);
    println!("client: {} bytes sent and received back intact", back.len());
    server.join().expect("server thread")?;
    Ok(())
}
