//! Certificates for tests of TLS: a CA of the test's own, server and client certificates it
//! signed, and a second CA that signed nothing here, all written as PEM files (made with
//! `rcgen`, so no tool is needed).

use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::PathBuf;

/// A CA and the files it made.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate (PEM).
    pub ca: PathBuf,
    /// Another CA's certificate, which signed nothing of this one's.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().expect("dir");
        let (ca_pem, issuer) = ca("runtime-cloud test CA");
        let (other_pem, _) = ca("a CA nobody here trusts");
        let ca = dir.path().join("ca.pem");
        let other_ca = dir.path().join("other-ca.pem");
        std::fs::write(&ca, ca_pem).expect("CA file");
        std::fs::write(&other_ca, other_pem).expect("CA file");
        Pki {
            dir,
            issuer,
            ca,
            other_ca,
        }
    }

    /// A certificate for `names` (DNS names or IP addresses) signed by the CA, for `purpose`,
    /// written as `{file}.pem` and `{file}.key`: their paths.
    fn leaf(
        &self,
        file: &str,
        names: &[&str],
        purpose: ExtendedKeyUsagePurpose,
    ) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.extended_key_usages = vec![purpose];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        let cert_path = self.dir.path().join(format!("{file}.pem"));
        let key_path = self.dir.path().join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).expect("certificate file");
        std::fs::write(&key_path, key.serialize_pem()).expect("key file");
        (cert_path, key_path)
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self) -> (PathBuf, PathBuf) {
        self.leaf(
            "server",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate for `name`.
    pub fn client(&self, name: &str) -> (PathBuf, PathBuf) {
        self.leaf(name, &[name], ExtendedKeyUsagePurpose::ClientAuth)
    }
}
