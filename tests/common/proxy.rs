//! A TCP proxy on loopback that a test can cut and restore, to make a real dependency
//! (PostgreSQL, the Temporal frontend) unreachable for the product's processes without
//! stopping it for everyone else.

use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwards `127.0.0.1:{port}` to a target while up. Cutting it closes every open
/// connection and refuses new ones until it is restored.
pub struct Proxy {
    pub addr: String,
    up: Arc<watch::Sender<bool>>,
}

impl Proxy {
    pub async fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr").to_string();
        let (up, _) = watch::channel(true);
        let up = Arc::new(up);
        let target = target.to_owned();
        let state = up.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !*state.borrow() {
                    // Refused: the client sees its connection closed at once.
                    drop(inbound);
                    continue;
                }
                let mut down = state.subscribe();
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = down.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Proxy { addr, up }
    }

    /// Closes every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }
}
