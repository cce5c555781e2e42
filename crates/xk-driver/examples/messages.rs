//! Messages with boundaries and tags (SAFENET's SEND_MESSAGE / GET_MESSAGE):
//! each message ends with EOM and carries a BTAG the receiver gets back.
//!
//! `cargo run -p xk-driver --example messages`

use xk_driver::api::{XtpListener, XtpStream};

fn main() -> std::io::Result<()> {
    // The listener and its streams are single-threaded (`!Send`): the
    // server thread makes its own and tells the client where it is.
    let (tell, where_) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut listener = XtpListener::bind("127.0.0.1:0", 7)?;
        tell.send(listener.local_addr()?).expect("main waits");
        let (mut s, _) = listener.accept()?;
        while let Some(m) = s.recv_message()? {
            println!("server: message of {} bytes, btag {:?}", m.data.len(), m.btag);
            s.send_message(&m.data, m.btag)?;
        }
        s.close()
    });
    let addr = where_.recv().expect("server started");
    let mut s = XtpStream::connect(addr, 7)?;
    for (i, text) in ["alarm: pump 3 pressure", "ack", "status: all nominal"].iter().enumerate() {
        s.send_message(text.as_bytes(), Some(100 + i as u64))?;
        let echo = s.recv_message()?.expect("echo");
        println!("client: got back {:?} tagged {:?}", String::from_utf8_lossy(&echo.data), echo.btag);
    }
    s.close()?;
    server.join().expect("server thread")?;
    Ok(())
}
