//! The serving certificate, re-read from its files when they change on disk, as Go's dynamic serving
//! certificates are: cert-manager (or any rotation writing the files in place or through a Secret volume's
//! symlink swap) renews the certificate without a restart.
//!
//! Every TLS handshake asks the resolver for the certificate; at most once per [`CHECK_EVERY`] that handshake
//! also reads both files and, when their contents differ from the last ones seen, loads the new pair. A pair
//! that cannot be used (a key that does not match, a file half written or missing) is logged once and the last
//! good certificate is kept, so a rotation that writes one file and then the other is picked up once both are
//! there. Connections already open keep the certificate of their handshake.

use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::Duration,
};

use rustls::{
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use tokio::time::Instant;

use crate::Error;

/// How often a handshake looks at the files: reading two small files once a second costs nothing next to the
/// handshakes themselves, and a renewed certificate is served within a second of being written.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The certificate and key files of `--tls-cert-file`/`--tls-private-key-file` (or `--cert-dir`).
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// Resolves every handshake to the current certificate, re-reading [`Files`] when they change.
#[derive(Debug)]
pub(crate) struct Reloading {
    provider: Arc<CryptoProvider>,
    /// `None`: a certificate held in memory only (self-signed), never re-read.
    files: Option<Files>,
    every: Duration,
    current: RwLock<Arc<CertifiedKey>>,
    check: Mutex<Check>,
}

/// What the last look at the files found.
#[derive(Debug)]
struct Check {
    at: Instant,
    /// A hash of both files' contents as last read, loaded or not: unchanged files are not parsed again.
    seen: u64,
    /// The last failure logged, so that files that stay broken are logged once, not on every check.
    failed: Option<String>,
}

impl Reloading {
    /// Loads `files` (an error names the file and what is wrong, so a bad pair fails the start).
    pub(crate) fn from_files(
        files: Files,
        provider: Arc<CryptoProvider>,
        every: Duration,
    ) -> Result<Self, Error> {
        let (cert, key) = read(&files).map_err(Error::Serving)?;
        let loaded = certified(&files, &cert, &key, &provider).map_err(Error::Serving)?;
        Ok(Self {
            provider,
            files: Some(files),
            every,
            current: RwLock::new(Arc::new(loaded)),
            check: Mutex::new(Check {
                at: Instant::now(),
                seen: fingerprint(&cert, &key),
                failed: None,
            }),
        })
    }

    /// A certificate and key given as PEM (the self-signed one), never re-read.
    pub(crate) fn fixed(cert_pem: &str, key_pem: &str, provider: Arc<CryptoProvider>) -> Result<Self, Error> {
        let files = Files {
            cert: PathBuf::from("the self-signed certificate"),
            key: PathBuf::from("the self-signed key"),
        };
        let loaded =
            certified(&files, cert_pem.as_bytes(), key_pem.as_bytes(), &provider).map_err(Error::Serving)?;
        Ok(Self {
            provider,
            files: None,
            every: Duration::MAX,
            current: RwLock::new(Arc::new(loaded)),
            check: Mutex::new(Check {
                at: Instant::now(),
                seen: 0,
                failed: None,
            }),
        })
    }

    /// The certificate now served.
    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-reads the files when a check is due. A handshake that finds another one checking does not wait for it:
    /// it takes the certificate as it is.
    fn refresh(&self) {
        let Some(files) = &self.files else {
            return;
        };
        let Ok(mut check) = self.check.try_lock() else {
            return;
        };
        if check.at.elapsed() < self.every {
            return;
        }
        check.at = Instant::now();
        let outcome = read(files).and_then(|(cert, key)| {
            let seen = fingerprint(&cert, &key);
            if seen == check.seen {
                return Ok(None);
            }
            check.seen = seen;
            certified(files, &cert, &key, &self.provider).map(Some)
        });
        match outcome {
            Ok(None) => {}
            Ok(Some(loaded)) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
                check.failed = None;
                tracing::info!(
                    cert = %files.cert.display(),
                    key = %files.key.display(),
                    "the serving certificate changed on disk: new connections get the new one"
                );
            }
            Err(e) => {
                if check.failed.as_ref() != Some(&e) {
                    tracing::warn!(
                        error = %e,
                        "the serving certificate changed on disk but cannot be used: still serving the last good one"
                    );
                }
                check.failed = Some(e);
            }
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        Some(self.current())
    }
}

/// Both files' contents.
fn read(files: &Files) -> Result<(Vec<u8>, Vec<u8>), String> {
    let cert = std::fs::read(&files.cert)
        .map_err(|e| format!("cannot read certificates from {}: {e}", files.cert.display()))?;
    let key = std::fs::read(&files.key)
        .map_err(|e| format!("cannot read a private key from {}: {e}", files.key.display()))?;
    Ok((cert, key))
}

fn fingerprint(cert: &[u8], key: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    (cert, key).hash(&mut hasher);
    hasher.finish()
}

/// The chain and key from PEM, checked to form a pair.
fn certified(
    files: &Files,
    cert: &[u8],
    key: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let name = |p: &Path| p.display().to_string();
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read certificates from {}: {e}", name(&files.cert)))?;
    if chain.is_empty() {
        return Err(format!("no certificate in {}", name(&files.cert)));
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("cannot read a private key from {}: {e}", name(&files.key)))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        format!(
            "the certificate in {} and the key in {} do not form a usable pair: {e}",
            name(&files.cert),
            name(&files.key)
        )
    })
}
