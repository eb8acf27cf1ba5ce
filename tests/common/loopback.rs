//! A real HTTP server on loopback for the stand-ins of outside services, serving a router in
//! the test process until dropped.

/// A running server.
pub struct Served {
    /// Its base URL, ending in `prefix`.
    pub url: String,
    server: tokio::task::JoinHandle<()>,
}

/// Serves `app` on a free loopback port; its URL is `http://127.0.0.1:{port}{prefix}`.
pub async fn serve(app: axum::Router, prefix: &str) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let url = format!(
        "http://{}{prefix}",
        listener.local_addr().expect("its address")
    );
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Served { url, server }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}
