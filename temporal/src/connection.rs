//! Connect a Temporal client.

use crate::Error;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use url::Url;

/// Connects to the frontend at `address` (`127.0.0.1:7233` or `http://…`) in `namespace`.
pub async fn connect(address: &str, namespace: &str) -> Result<Client, Error> {
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let url = Url::parse(&url).map_err(|_| Error::Address(address.to_owned()))?;
    let connection = Connection::connect(
        ConnectionOptions::new(url)
            .identity(format!("runtime-cloud@{}", std::process::id()))
            .build(),
    )
    .await
    .map_err(|e| Error::Connect {
        address: address.to_owned(),
        source: anyhow::anyhow!(e),
    })?;
    Client::new(connection, ClientOptions::new(namespace.to_owned()).build()).map_err(|e| {
        Error::Connect {
            address: address.to_owned(),
            source: anyhow::anyhow!(e),
        }
    })
}
