//! Who may tell a worker machine what to do: every subtask, run announcement, cancel and
//! permission answer a coordinator sends is signed with the coordinator's Ed25519 key (a NATS
//! nkey, [`SigningKey`]); a worker machine acts only on messages signed by a key it was started
//! to trust ([`TrustedKeys`], `ahelper worker --trust-coordinator KEY`).
//!
//! On the wire a signed message is the JSON object [`Signed`]: the signer's public key, the
//! signature and the message's own JSON as a string. The signature covers [`SIGNING_CONTEXT`],
//! the NATS subject and that string, so a message cannot be moved to another subject (another
//! run or worker). Each signed message also carries a nonce and an expiry ([`Freshness`]):
//! expired messages are refused; a subtask's nonce is its JetStream message id, which the work
//! stream remembers for [`SUBTASK_LIFETIME`] (its duplicate window), so the same subtask
//! published again is dropped by the server, and one published under another id is refused by
//! the worker; an answer names the question's nonce and a cancel the subtask's, and only the
//! first valid one counts.

use base64::Engine;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What every signature covers before the subject and the body (domain separation: a
/// signature of this protocol is no signature of anything else the key might sign).
pub const SIGNING_CONTEXT: &str = "ahelper-swarm-v2";
/// How long a subtask may wait in the work queue and run; also the work stream's duplicate
/// window (24 h).
pub const SUBTASK_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long a run announcement, an answer or a cancel is valid after it was sent.
pub const SHORT_LIFETIME: Duration = Duration::from_secs(300);
/// Clock difference between machines tolerated in expiry checks.
const CLOCK_SKEW: Duration = Duration::from_secs(120);

/// A message and its signature, as JSON on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Signed {
    /// The signer's public nkey (`U…`, 56 characters).
    pub key: String,
    /// The Ed25519 signature of [`signed_bytes`], base64url without padding.
    pub sig: String,
    /// The message's JSON text.
    pub body: String,
}

/// The nonce and expiry every signed message carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freshness {
    /// A fresh UUID per message.
    pub nonce: String,
    /// Seconds since the Unix epoch after which the message is refused.
    pub expires_at: u64,
}

impl Freshness {
    /// A new nonce, valid for `lifetime` from now.
    pub fn new(lifetime: Duration) -> Freshness {
        Freshness {
            nonce: uuid::Uuid::now_v7().to_string(),
            expires_at: unix_now() + lifetime.as_secs(),
        }
    }

    /// Checks the nonce's format and that the message is neither expired nor valid for longer
    /// than `lifetime` (plus the clock skew) from now.
    ///
    /// # Errors
    /// [`AuthError::Expired`], [`AuthError::BadNonce`].
    pub fn check(&self, lifetime: Duration) -> Result<(), AuthError> {
        uuid::Uuid::try_parse(&self.nonce).map_err(|_| AuthError::BadNonce)?;
        let now = unix_now();
        let latest = now + lifetime.as_secs() + CLOCK_SKEW.as_secs();
        if self.expires_at + CLOCK_SKEW.as_secs() < now || self.expires_at > latest {
            return Err(AuthError::Expired {
                expires_at: self.expires_at,
                now,
            });
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A message was not accepted as the coordinator's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// Not a signed message at all (an older ahelper, or a forgery without a key).
    #[error("the message is not signed; only a coordinator's signed messages are acted on")]
    Unsigned,
    /// Signed by a key this machine does not trust.
    #[error(
        "signed by {key}, a key this worker does not trust (give it with --trust-coordinator if it is your coordinator's)"
    )]
    UntrustedKey {
        /// The key the message named.
        key: String,
    },
    /// The signature does not verify.
    #[error("its signature does not verify (forged or altered)")]
    BadSignature,
    /// Expired, or valid for longer than such a message may be.
    #[error("it expired or is not yet valid (expires at {expires_at}, now {now}; Unix seconds)")]
    Expired {
        /// Its expiry.
        expires_at: u64,
        /// This machine's clock.
        now: u64,
    },
    /// The nonce is not a UUID.
    #[error("its nonce is not a UUID")]
    BadNonce,
    /// A subtask whose JetStream message id is not its signed nonce: the message was published
    /// again by someone else.
    #[error("its message id is not its signed nonce: a replay of an earlier message")]
    Replayed,
}

/// The bytes a signature covers: [`SIGNING_CONTEXT`], the subject and the body, each ended by a
/// newline.
pub fn signed_bytes(subject: &str, body: &str) -> Vec<u8> {
    format!("{SIGNING_CONTEXT}\n{subject}\n{body}").into_bytes()
}

/// A coordinator's signing key.
pub struct SigningKey(nkeys::KeyPair);

/// The signing key could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading, creating or writing the seed file failed.
    #[error("cannot {action} the signing key {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file holds no valid nkey seed.
    #[error(
        "{path} holds no nkey seed (`SU…`): {message}; remove it to have a new key made, or give another with AHELPER_NATS_SIGNING_KEY"
    )]
    BadSeed {
        /// The file.
        path: PathBuf,
        /// Cause.
        message: String,
    },
    /// A public key given to trust is not one.
    #[error(
        "`{key}` is not a public nkey ({message}); give the key `ahelper swarm key` prints on the coordinator's machine"
    )]
    BadPublicKey {
        /// The text given.
        key: String,
        /// Cause.
        message: String,
    },
}

impl SigningKey {
    /// Reads the seed in `path` (a user nkey seed, `SU…`), or makes a new key there (mode 0600,
    /// written atomically) when the file does not exist.
    ///
    /// # Errors
    /// [`KeyError`].
    pub fn load_or_create(path: &Path) -> Result<SigningKey, KeyError> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let pair =
                    nkeys::KeyPair::from_seed(text.trim()).map_err(|e| KeyError::BadSeed {
                        path: path.to_path_buf(),
                        message: e.to_string(),
                    })?;
                Ok(SigningKey(pair))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Err(source) => Err(KeyError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    fn create(path: &Path) -> Result<SigningKey, KeyError> {
        let pair = nkeys::KeyPair::new_user();
        let seed = pair.seed().map_err(|e| KeyError::BadSeed {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let io = |action, source| KeyError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("create the directory of", e))?;
        }
        write_private(path, format!("{seed}\n").as_bytes()).map_err(|e| io("write", e))?;
        Ok(SigningKey(pair))
    }

    /// The public key workers trust (`U…`).
    pub fn public_key(&self) -> String {
        self.0.public_key()
    }

    /// `body` (a message's JSON) for `subject`, signed: the [`Signed`] JSON to publish.
    pub fn sign(&self, subject: &str, body: String) -> Vec<u8> {
        let signature = self
            .0
            .sign(&signed_bytes(subject, &body))
            .unwrap_or_default();
        let signed = Signed {
            key: self.public_key(),
            sig: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature),
            body,
        };
        serde_json::to_vec(&signed).unwrap_or_default()
    }
}

/// Writes `bytes` to `path` readable by its owner only: a temporary file of mode 0600 beside
/// it, synced, renamed into place.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{}.ahelper-{}.tmp",
        name.unwrap_or_default(),
        uuid::Uuid::now_v7()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The coordinator keys a worker machine accepts messages from.
#[derive(Default)]
pub struct TrustedKeys(Vec<nkeys::KeyPair>);

impl TrustedKeys {
    /// Parses public nkeys (`U…`).
    ///
    /// # Errors
    /// [`KeyError::BadPublicKey`] naming the first that is not one.
    pub fn parse<S: AsRef<str>>(keys: &[S]) -> Result<TrustedKeys, KeyError> {
        let pairs = keys
            .iter()
            .map(|key| {
                let key = key.as_ref().trim();
                nkeys::KeyPair::from_public_key(key).map_err(|e| KeyError::BadPublicKey {
                    key: crate::text::clip(key, 80).0.to_string(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedKeys(pairs))
    }

    /// A single trusted key (a coordinator verifying its own messages in tests).
    pub fn of(key: &SigningKey) -> TrustedKeys {
        TrustedKeys::parse(&[key.public_key()]).unwrap_or_default()
    }

    /// Whether no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The body of the signed message `payload` that arrived on `subject`, once its key is
    /// trusted and its signature verifies.
    ///
    /// # Errors
    /// [`AuthError::Unsigned`], [`AuthError::UntrustedKey`], [`AuthError::BadSignature`].
    pub fn open(&self, subject: &str, payload: &[u8]) -> Result<String, AuthError> {
        let signed: Signed = serde_json::from_slice(payload).map_err(|_| AuthError::Unsigned)?;
        let Some(pair) = self.0.iter().find(|p| p.public_key() == signed.key) else {
            return Err(AuthError::UntrustedKey {
                key: crate::text::clip(&signed.key, 60).0.to_string(),
            });
        };
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&signed.sig)
            .map_err(|_| AuthError::BadSignature)?;
        pair.verify(&signed_bytes(subject, &signed.body), &signature)
            .map_err(|_| AuthError::BadSignature)?;
        Ok(signed.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey(nkeys::KeyPair::new_user())
    }

    #[test]
    fn a_signed_message_opens_only_with_its_key_on_its_subject_unaltered() {
        let (ours, theirs) = (key(), key());
        let trusted = TrustedKeys::of(&ours);
        let signed = ours.sign("ahelper.work.r.w1", "{\"a\":1}".into());
        assert_eq!(
            trusted.open("ahelper.work.r.w1", &signed).unwrap(),
            "{\"a\":1}"
        );
        assert_eq!(
            trusted.open("ahelper.work.r.w2", &signed),
            Err(AuthError::BadSignature)
        );
        let mut altered: Signed = serde_json::from_slice(&signed).unwrap();
        altered.body = "{\"a\":2}".into();
        let altered = serde_json::to_vec(&altered).unwrap();
        assert_eq!(
            trusted.open("ahelper.work.r.w1", &altered),
            Err(AuthError::BadSignature)
        );
        let forged = theirs.sign("ahelper.work.r.w1", "{\"a\":1}".into());
        assert!(matches!(
            trusted.open("ahelper.work.r.w1", &forged),
            Err(AuthError::UntrustedKey { .. })
        ));
        assert_eq!(
            trusted.open("ahelper.work.r.w1", b"{\"a\":1}"),
            Err(AuthError::Unsigned)
        );
    }

    #[test]
    fn expired_and_far_future_messages_are_refused() {
        let fresh = Freshness::new(SHORT_LIFETIME);
        assert!(fresh.check(SHORT_LIFETIME).is_ok());
        let old = Freshness {
            expires_at: unix_now() - 3600,
            ..fresh.clone()
        };
        assert!(matches!(
            old.check(SHORT_LIFETIME),
            Err(AuthError::Expired { .. })
        ));
        let far = Freshness::new(SUBTASK_LIFETIME);
        assert!(matches!(
            far.check(SHORT_LIFETIME),
            Err(AuthError::Expired { .. })
        ));
        let bad = Freshness {
            nonce: "x".into(),
            ..fresh
        };
        assert_eq!(bad.check(SHORT_LIFETIME), Err(AuthError::BadNonce));
    }

    #[test]
    fn a_key_is_made_once_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/coordinator.nk");
        let made = SigningKey::load_or_create(&path).unwrap();
        let read = SigningKey::load_or_create(&path).unwrap();
        assert_eq!(made.public_key(), read.public_key());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the seed is private");
        assert!(TrustedKeys::parse(&["not a key"]).is_err());
    }
}
