//! The async API on tokio: a listener task echoes a stream; the client writes
//! 1 MB, shuts its side down and reads the echo back.
//!
//! `cargo run -p xk-driver --features tokio --example async_stream`

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xk_driver::aio::{AsyncXtpListener, AsyncXtpStream};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let listener = AsyncXtpListener::bind("127.0.0.1:0", 7).await?;
    let addr = listener.local_addr();
    let server = tokio::spawn(async move {
        let (mut s, peer) = listener.accept().await?;
        let mut data = Vec::new();
        s.read_to_end(&mut data).await?;
        s.write_all(&data).await?;
        s.shutdown().await?;
        println!("server: echoed {} bytes to {peer}", data.len());
        Ok::<_, std::io::Error>(())
    });
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut s = AsyncXtpStream::connect(addr, 7).await?;
    let (mut rd, mut wr) = tokio::io::split(&mut s);
    let writer = async {
        wr.write_all(&data).await?;
        wr.shutdown().await
    };
    let mut back = Vec::new();
    let reader = rd.read_to_end(&mut back);
    let (w, r) = tokio::join!(writer, reader);
    w?;
    r?;
    assert_eq!(back, data);
    println!("client: {} bytes sent and received back intact", back.len());
    server.await.expect("server task")?;
    Ok(())
}
