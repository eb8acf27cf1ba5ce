//! Workflow payloads encrypted before they leave the process: an AES-256-GCM
//! [`PayloadCodec`] over the keys of [`PayloadKeys`].
//!
//! The codec is the SDK's own hook: set on the client's [`DataConverter`], it is applied by the
//! client to what it sends and reads (starts, signals, queries, schedules, describe) and, since
//! a worker inherits its client's converter, by every worker at its boundary with Core: each
//! activation and activity task is decoded before workflow or activity code sees it, each
//! completion and heartbeat encoded before Core sends it. Temporal stores the payloads as
//! ciphertext; what is not a payload stays plain: workflow and activity ids and types, task
//! queues, search attributes (the SDK never encodes them: Temporal indexes them), and failures'
//! messages and stack traces ([`PayloadKeys::data_converter`] says why).
//!
//! An encrypted payload has the metadata Temporal's samples use, `encoding: binary/encrypted`
//! and `encryption-key-id: <id>`, and its data is a random 96-bit nonce followed by the
//! AES-256-GCM ciphertext (with its tag) of the original payload's protobuf bytes, metadata
//! and data together, so the original encoding comes back on decode. A payload without that
//! encoding passes decode unchanged: histories written before encryption was turned on still
//! read.
//!
//! Keys rotate: the first key encrypts, every key decrypts. A key is a file of 32 random bytes
//! in base64 (`head -c 32 /dev/urandom | base64 > keys/2026-01.key`), named by its stem.

use crate::Error;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use futures::future::BoxFuture;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use temporalio_common::data_converters::{
    DataConverter, DefaultFailureConverter, PayloadCodec, PayloadConversionError, PayloadConverter,
    SerializationContextData,
};
use temporalio_common::protos::temporal::api::common::v1::Payload;
use zeroize::Zeroizing;

/// The metadata key naming a payload's encoding.
pub const ENCODING_KEY: &str = "encoding";
/// The encoding of an encrypted payload.
pub const ENCRYPTED_ENCODING: &str = "binary/encrypted";
/// The metadata key naming the key an encrypted payload was encrypted with.
pub const KEY_ID_KEY: &str = "encryption-key-id";

/// The length of a key: AES-256.
pub const KEY_BYTES: usize = 32;
/// The length of a nonce: GCM's 96 bits.
const NONCE_BYTES: usize = 12;
/// The length of GCM's authentication tag, at the end of the ciphertext.
const TAG_BYTES: usize = 16;

/// One key: its id and its cipher.
struct PayloadKey {
    /// The key file's stem, carried in each payload it encrypts.
    id: String,
    /// The key's bytes, kept to compare configurations; zeroed when dropped.
    secret: Zeroizing<[u8; KEY_BYTES]>,
    /// The cipher, its round keys zeroed when dropped (`aes-gcm`'s `zeroize`).
    cipher: Aes256Gcm,
}

/// The keys workflow payloads are encrypted with: the first encrypts, all decrypt. Cheap to
/// clone. Also the codec itself ([`PayloadCodec`]).
#[derive(Clone)]
pub struct PayloadKeys {
    /// Never empty; ids unique.
    keys: Arc<[PayloadKey]>,
}

// Ids only: the keys stay out of logs and panics.
impl std::fmt::Debug for PayloadKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadKeys")
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

/// The same ids holding the same keys, in the same order.
impl PartialEq for PayloadKeys {
    fn eq(&self, other: &Self) -> bool {
        self.keys.len() == other.keys.len()
            && self
                .keys
                .iter()
                .zip(other.keys.iter())
                .all(|(a, b)| a.id == b.id && *a.secret == *b.secret)
    }
}

impl Eq for PayloadKeys {}

impl PayloadKeys {
    /// Keys from their ids and bytes, the first encrypting. At least one; ids unique and not
    /// empty.
    pub fn new(keys: Vec<(String, [u8; KEY_BYTES])>) -> Result<Self, Error> {
        if keys.is_empty() {
            return Err(Error::PayloadKeyIds("no payload key given".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut built = Vec::with_capacity(keys.len());
        for (id, bytes) in keys {
            let secret = Zeroizing::new(bytes);
            if id.is_empty() {
                return Err(Error::PayloadKeyIds("a payload key has an empty id".into()));
            }
            if !seen.insert(id.clone()) {
                return Err(Error::PayloadKeyIds(format!(
                    "two payload keys have the id `{id}` (a key's id is its file's stem)"
                )));
            }
            let cipher = Aes256Gcm::new_from_slice(secret.as_slice()).map_err(|_| {
                Error::PayloadKeyIds(format!("the payload key `{id}` is not 32 bytes"))
            })?;
            built.push(PayloadKey { id, secret, cipher });
        }
        Ok(Self { keys: built.into() })
    }

    /// Reads each file: 32 bytes in base64 (a trailing line break, as `base64` writes it, is
    /// dropped), its id the file's stem. The first file's key encrypts.
    pub fn from_files(paths: &[PathBuf]) -> Result<Self, Error> {
        let keys = paths
            .iter()
            .map(|path| Ok((key_id(path)?, read_key(path)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Self::new(keys)
    }

    /// The id of the key that encrypts.
    pub fn encrypting_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Every key's id, the encrypting one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    /// A data converter that encrypts with these keys, the SDK's default payload and failure
    /// converters around it. A failure's message and stack trace stay plain: the SDK can move
    /// them into an encoded attribute (`DefaultFailureConverter::new(true)`), but the
    /// workflows then read "Encoded failure" for an activity's error (SDK 1.1.1), and the runs'
    /// recorded reasons with them.
    pub fn data_converter(&self) -> DataConverter {
        DataConverter::new(
            PayloadConverter::default(),
            DefaultFailureConverter::default(),
            self.clone(),
        )
    }

    /// `payload` encrypted with the first key.
    pub fn encrypt(&self, payload: &Payload) -> Result<Payload, Error> {
        let key = &self.keys[0];
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let plain = Zeroizing::new(payload.encode_to_vec());
        let sealed = key
            .cipher
            .encrypt(&nonce, plain.as_slice())
            .map_err(|_| Error::MalformedPayload("the payload is too large to encrypt"))?;
        let mut data = Vec::with_capacity(NONCE_BYTES + sealed.len());
        data.extend_from_slice(&nonce);
        data.extend_from_slice(&sealed);
        Ok(Payload {
            metadata: [
                (
                    ENCODING_KEY.to_owned(),
                    ENCRYPTED_ENCODING.as_bytes().to_vec(),
                ),
                (KEY_ID_KEY.to_owned(), key.id.as_bytes().to_vec()),
            ]
            .into(),
            data,
            ..Default::default()
        })
    }

    /// `payload` decrypted when it is encrypted, else as it is.
    pub fn decrypt(&self, payload: Payload) -> Result<Payload, Error> {
        if !is_encrypted(&payload) {
            return Ok(payload);
        }
        let id = payload
            .metadata
            .get(KEY_ID_KEY)
            .map(|id| String::from_utf8_lossy(id).into_owned())
            .ok_or(Error::MalformedPayload(
                "an encrypted payload names no key (`encryption-key-id`)",
            ))?;
        let key =
            self.keys
                .iter()
                .find(|k| k.id == id)
                .ok_or_else(|| Error::UnknownPayloadKey {
                    id: id.clone(),
                    known: self.ids().map(str::to_owned).collect(),
                })?;
        if payload.data.len() < NONCE_BYTES + TAG_BYTES {
            return Err(Error::MalformedPayload(
                "an encrypted payload is shorter than a nonce and a tag",
            ));
        }
        let (nonce, sealed) = payload.data.split_at(NONCE_BYTES);
        let nonce = <[u8; NONCE_BYTES]>::try_from(nonce)
            .map_err(|_| Error::MalformedPayload("an encrypted payload's nonce is not 96 bits"))?;
        let plain = key
            .cipher
            .decrypt(&Nonce::from(nonce), sealed)
            .map(Zeroizing::new)
            .map_err(|_| Error::UndecryptablePayload { id: id.clone() })?;
        Payload::decode(plain.as_slice()).map_err(|_| {
            Error::MalformedPayload("an encrypted payload does not hold a payload once decrypted")
        })
    }

    /// Every payload encrypted.
    pub fn encrypt_all(&self, payloads: &[Payload]) -> Result<Vec<Payload>, Error> {
        payloads.iter().map(|p| self.encrypt(p)).collect()
    }

    /// Every payload decrypted (the plain ones as they are).
    pub fn decrypt_all(&self, payloads: Vec<Payload>) -> Result<Vec<Payload>, Error> {
        payloads.into_iter().map(|p| self.decrypt(p)).collect()
    }
}

/// Whether `payload`'s encoding says it is encrypted.
pub fn is_encrypted(payload: &Payload) -> bool {
    payload
        .metadata
        .get(ENCODING_KEY)
        .is_some_and(|e| e == ENCRYPTED_ENCODING.as_bytes())
}

/// A key file's id: its stem.
fn key_id(path: &Path) -> Result<String, Error> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Error::PayloadKey {
            path: path.to_owned(),
            reason: "its name has no stem to serve as the key id".into(),
        })
}

/// A key file's 32 bytes. The errors say what is wrong, never what the file holds.
fn read_key(path: &Path) -> Result<[u8; KEY_BYTES], Error> {
    let bad = |reason: String| Error::PayloadKey {
        path: path.to_owned(),
        reason,
    };
    let text = Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| bad(format!("cannot be read: {e}")))?,
    );
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    let bytes = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| bad("does not hold base64".into()))?,
    );
    <[u8; KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
        bad(format!(
            "holds {} bytes, not {KEY_BYTES} (head -c {KEY_BYTES} /dev/urandom | base64)",
            bytes.len()
        ))
    })
}

/// The SDK's hook: encryption is CPU work on bytes at hand, done before the future is
/// returned.
impl PayloadCodec for PayloadKeys {
    fn encode(
        &self,
        _: &SerializationContextData,
        payloads: Vec<Payload>,
    ) -> BoxFuture<'static, Result<Vec<Payload>, PayloadConversionError>> {
        let encoded = self.encrypt_all(&payloads).map_err(conversion_error);
        Box::pin(std::future::ready(encoded))
    }

    fn decode(
        &self,
        _: &SerializationContextData,
        payloads: Vec<Payload>,
    ) -> BoxFuture<'static, Result<Vec<Payload>, PayloadConversionError>> {
        let decoded = self.decrypt_all(payloads).map_err(conversion_error);
        Box::pin(std::future::ready(decoded))
    }
}

/// A codec failure as the SDK takes it.
fn conversion_error(e: Error) -> PayloadConversionError {
    PayloadConversionError::EncodingError(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_payload(text: &str) -> Payload {
        Payload {
            metadata: [("encoding".to_owned(), b"json/plain".to_vec())].into(),
            data: format!("{text:?}").into_bytes(),
            ..Default::default()
        }
    }

    fn keys(ids: &[(&str, u8)]) -> PayloadKeys {
        PayloadKeys::new(
            ids.iter()
                .map(|(id, fill)| ((*id).to_owned(), [*fill; KEY_BYTES]))
                .collect(),
        )
        .expect("keys")
    }

    fn ctx() -> SerializationContextData {
        SerializationContextData::None
    }

    /// Encode then decode through the SDK's hook gives the payloads back, metadata and all;
    /// what was encoded carries the samples' metadata and no plaintext.
    #[tokio::test]
    async fn payloads_round_trip_through_the_codec() {
        let codec = keys(&[("2026-01", 1)]);
        let plain = vec![json_payload("marker-7c1e9"), json_payload("")];
        let encoded = codec.encode(&ctx(), plain.clone()).await.expect("encode");
        assert_eq!(encoded.len(), 2);
        for p in &encoded {
            assert_eq!(p.metadata[ENCODING_KEY], b"binary/encrypted");
            assert_eq!(p.metadata[KEY_ID_KEY], b"2026-01");
            assert!(!String::from_utf8_lossy(&p.data).contains("marker-7c1e9"));
            assert!(!String::from_utf8_lossy(&p.data).contains("json/plain"));
        }
        // A fresh nonce each time: the same payload twice is two ciphertexts.
        let again = codec.encode(&ctx(), plain.clone()).await.expect("encode");
        assert_ne!(encoded[0].data, again[0].data);
        assert_eq!(encoded[0].data[..12].len(), 12);
        let decoded = codec.decode(&ctx(), encoded).await.expect("decode");
        assert_eq!(decoded, plain);
    }

    /// What the old key encrypted still decodes once a new key encrypts and the old one is
    /// second; what the new key encrypts names the new key.
    #[test]
    fn a_rotated_key_still_decrypts() {
        let old = keys(&[("old", 1)]);
        let sealed = old.encrypt(&json_payload("before")).expect("encrypt");
        let rotated = keys(&[("new", 2), ("old", 1)]);
        assert_eq!(rotated.encrypting_id(), "new");
        assert_eq!(
            rotated.decrypt(sealed).expect("decrypt"),
            json_payload("before")
        );
        let fresh = rotated.encrypt(&json_payload("after")).expect("encrypt");
        assert_eq!(fresh.metadata[KEY_ID_KEY], b"new");
        assert!(old.decrypt(fresh).is_err(), "the old set lacks the new key");
    }

    /// A payload of a key that is not configured is refused, naming the key.
    #[test]
    fn an_unknown_key_id_is_refused_by_name() {
        let sealed = keys(&[("retired", 3)])
            .encrypt(&json_payload("x"))
            .expect("encrypt");
        let e = keys(&[("current", 4)]).decrypt(sealed).unwrap_err();
        assert!(matches!(e, Error::UnknownPayloadKey { ref id, .. } if id == "retired"));
        let text = e.to_string();
        assert!(
            text.contains("`retired`") && text.contains("current"),
            "{text}"
        );
    }

    /// A flipped bit anywhere in nonce or ciphertext, or a key of the same id with other
    /// bytes, fails decryption instead of yielding altered data.
    #[test]
    fn a_tampered_payload_is_refused() {
        let codec = keys(&[("k", 5)]);
        let sealed = codec.encrypt(&json_payload("intact")).expect("encrypt");
        for at in [0, NONCE_BYTES, sealed.data.len() - 1] {
            let mut tampered = sealed.clone();
            tampered.data[at] ^= 0x01;
            let e = codec.decrypt(tampered).unwrap_err();
            assert!(
                matches!(e, Error::UndecryptablePayload { .. }),
                "byte {at}: {e}"
            );
        }
        let impostor = keys(&[("k", 6)]);
        assert!(matches!(
            impostor.decrypt(sealed.clone()),
            Err(Error::UndecryptablePayload { .. })
        ));
        let mut truncated = sealed;
        truncated.data.truncate(NONCE_BYTES + TAG_BYTES - 1);
        assert!(matches!(
            codec.decrypt(truncated),
            Err(Error::MalformedPayload(_))
        ));
    }

    /// A payload that is not encrypted (a history from before encryption) passes decode as
    /// it is.
    #[tokio::test]
    async fn a_plain_payload_passes_decode_unchanged() {
        let codec = keys(&[("k", 7)]);
        let plain = vec![json_payload("old history"), Payload::default()];
        let decoded = codec.decode(&ctx(), plain.clone()).await.expect("decode");
        assert_eq!(decoded, plain);
    }

    /// Key files: base64 with or without the line break `base64` ends with, the id the stem;
    /// a bad file is refused naming its path and never quoting it; duplicate ids are refused.
    #[test]
    fn keys_are_read_from_files_named_by_their_stem() {
        let dir = tempfile::tempdir().expect("dir");
        let b64 = |fill: u8| base64::engine::general_purpose::STANDARD.encode([fill; KEY_BYTES]);
        let first = dir.path().join("2026-02.key");
        let second = dir.path().join("2026-01.key");
        std::fs::write(&first, format!("{}\n", b64(1))).expect("write");
        std::fs::write(&second, b64(2)).expect("write");
        let keys = PayloadKeys::from_files(&[first.clone(), second.clone()]).expect("keys");
        assert_eq!(keys.ids().collect::<Vec<_>>(), ["2026-02", "2026-01"]);
        assert_eq!(keys, self::keys(&[("2026-02", 1), ("2026-01", 2)]));

        let short = dir.path().join("short.key");
        std::fs::write(
            &short,
            base64::engine::general_purpose::STANDARD.encode(b"sixteen-bytes!!!"),
        )
        .expect("write");
        let e = PayloadKeys::from_files(&[short]).unwrap_err().to_string();
        assert!(e.contains("short.key") && e.contains("16 bytes"), "{e}");
        let junk = dir.path().join("junk.key");
        std::fs::write(&junk, "not base64 at all: s3cr3t").expect("write");
        let e = PayloadKeys::from_files(&[junk]).unwrap_err().to_string();
        assert!(e.contains("junk.key") && !e.contains("s3cr3t"), "{e}");
        let missing = PayloadKeys::from_files(&[dir.path().join("absent.key")]).unwrap_err();
        assert!(missing.to_string().contains("absent.key"), "{missing}");

        let twin = dir.path().join("sub");
        std::fs::create_dir(&twin).expect("dir");
        let twin = twin.join("2026-02.key");
        std::fs::write(&twin, b64(3)).expect("write");
        let e = PayloadKeys::from_files(&[first, twin])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`2026-02`"), "{e}");
        assert!(PayloadKeys::from_files(&[]).is_err());
    }

    /// Debug output names the keys, never their bytes.
    #[test]
    fn debug_output_shows_ids_only() {
        let keys = keys(&[("visible-id", 0xAB)]);
        let text = format!("{keys:?}");
        assert!(text.contains("visible-id"), "{text}");
        assert!(
            !text.contains("171") && !text.to_lowercase().contains("ab, "),
            "{text}"
        );
    }
}
