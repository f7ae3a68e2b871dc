//! Static X25519 keys and their text formats.
//!
//! Keys are written as standard base64 (RFC 4648, with `=` padding): 44 characters for 32
//! bytes, the same encoding WireGuard uses, so operators can recognise and copy them. The
//! codec is a few dozen lines of std-only code (below) rather than a dependency, and it is
//! strict: only canonical encodings of exactly 32 bytes are accepted.
//!
//! A key file holds one `Name = value` pair per line; blank lines and lines starting with `#`
//! are ignored:
//!
//! ```text
//! # Horde host key. Keep this file private.
//! PrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=
//! PublicKey = HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=
//! ```
//!
//! `PrivateKey` is required; `PublicKey` is optional, and when present it must match the key
//! derived from the private key, which catches truncated or mixed-up files.

use std::fmt;
use std::str::FromStr;

use rand::{CryptoRng, RngCore};
use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};

/// Length in bytes of an X25519 public or private key.
pub const KEY_LEN: usize = 32;

/// Length of a key in base64 text.
pub const KEY_TEXT_LEN: usize = 44;

/// Errors from parsing keys and key files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key text does not have the length of a base64-encoded 32-byte key.
    #[error("expected a 32-byte key as 44 characters of base64, got {0} characters")]
    Length(usize),
    /// A character outside the base64 alphabet, or misplaced padding.
    #[error("invalid base64 character {ch:?} at position {pos}")]
    Character {
        /// The offending character.
        ch: char,
        /// Its 0-based character position within the key text.
        pos: usize,
    },
    /// The final base64 character has non-zero padding bits (not a canonical encoding).
    #[error("non-canonical base64: padding bits of the last character are not zero")]
    NonCanonical,
    /// A key-file line that is not blank, a comment or `Name = value`.
    #[error("line {line}: expected `Name = value`")]
    Syntax {
        /// 1-based line number.
        line: usize,
    },
    /// A key-file field other than `PrivateKey` or `PublicKey`.
    #[error("line {line}: unknown field `{name}` (expected `PrivateKey` or `PublicKey`)")]
    UnknownField {
        /// 1-based line number.
        line: usize,
        /// The field name as written.
        name: String,
    },
    /// A key-file field given twice.
    #[error("line {line}: duplicate field `{name}`")]
    DuplicateField {
        /// 1-based line number of the second occurrence.
        line: usize,
        /// The field name.
        name: &'static str,
    },
    /// A key-file field whose value is not a valid key.
    #[error("line {line}: {name}: {source}")]
    Field {
        /// 1-based line number.
        line: usize,
        /// The field name.
        name: &'static str,
        /// What is wrong with the value.
        source: Box<KeyError>,
    },
    /// The key file has no `PrivateKey` line.
    #[error("key file has no `PrivateKey` line")]
    MissingPrivateKey,
    /// The key file's `PublicKey` is not the public key of its `PrivateKey`.
    #[error("line {line}: PublicKey does not match PrivateKey")]
    Mismatch {
        /// 1-based line number of the `PublicKey` line.
        line: usize,
    },
}

/// A static X25519 public key identifying a host.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey([u8; KEY_LEN]);

impl PublicKey {
    /// Wraps raw key bytes.
    pub const fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The raw key bytes.
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Display for PublicKey {
    /// Standard base64, 44 characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64_encode(&self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    /// Parses a base64 key; surrounding whitespace is ignored.
    fn from_str(s: &str) -> Result<Self, KeyError> {
        decode_key(s.trim()).map(Self)
    }
}

/// A host's static X25519 key pair.
///
/// The private key is overwritten with zeros when the value is dropped, and is never shown by
/// `Debug`.
#[derive(Clone)]
pub struct Keypair {
    private: [u8; KEY_LEN],
    public: PublicKey,
}

impl Keypair {
    /// Generates a key pair from the operating system's random number generator.
    pub fn generate() -> Self {
        Self::generate_with(&mut rand::rngs::OsRng)
    }

    /// Generates a key pair from the given cryptographically secure RNG (seed it for
    /// reproducible tests and simulations).
    pub fn generate_with<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut private = [0u8; KEY_LEN];
        rng.fill_bytes(&mut private);
        Self::from_private(private)
    }

    /// Builds a key pair from a private key, deriving the public key. Any 32 bytes are a valid
    /// X25519 private key (clamping happens when the key is used).
    pub fn from_private(private: [u8; KEY_LEN]) -> Self {
        let public = derive_public(&private);
        Self { private, public }
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The raw private key, for handing to the Noise implementation.
    pub(crate) fn private_bytes(&self) -> &[u8; KEY_LEN] {
        &self.private
    }

    /// Renders the key file (see the module documentation). The result contains the private
    /// key: write it with owner-only permissions.
    pub fn to_file_string(&self) -> String {
        format!(
            "# Horde host key. Keep this file private.\nPrivateKey = {}\nPublicKey = {}\n",
            base64_encode(&self.private),
            self.public
        )
    }

    /// Writes the key file at `path` (replacing one there), created with mode 0600 so that
    /// it is never readable by others, not even between its creation and a later chmod.
    pub fn write_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(path)?
            .write_all(self.to_file_string().as_bytes())
    }
}

impl FromStr for Keypair {
    type Err = KeyError;

    /// Parses a key file (see the module documentation).
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let mut private: Option<[u8; KEY_LEN]> = None;
        let mut public: Option<(usize, PublicKey)> = None;
        for (i, raw) in s.lines().enumerate() {
            let line = i + 1;
            let text = raw.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let (name, value) = text.split_once('=').ok_or(KeyError::Syntax { line })?;
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                return Err(KeyError::Syntax { line });
            }
            let field = |name: &'static str, e: KeyError| KeyError::Field {
                line,
                name,
                source: Box::new(e),
            };
            match name {
                "PrivateKey" => {
                    if private.is_some() {
                        return Err(KeyError::DuplicateField {
                            line,
                            name: "PrivateKey",
                        });
                    }
                    private = Some(decode_key(value).map_err(|e| field("PrivateKey", e))?);
                }
                "PublicKey" => {
                    if public.is_some() {
                        return Err(KeyError::DuplicateField {
                            line,
                            name: "PublicKey",
                        });
                    }
                    let key = decode_key(value).map_err(|e| field("PublicKey", e))?;
                    public = Some((line, PublicKey(key)));
                }
                other => {
                    return Err(KeyError::UnknownField {
                        line,
                        name: other.to_string(),
                    });
                }
            }
        }
        let pair = Self::from_private(private.ok_or(KeyError::MissingPrivateKey)?);
        if let Some((line, stated)) = public {
            if stated != pair.public {
                return Err(KeyError::Mismatch { line });
            }
        }
        Ok(pair)
    }
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keypair")
            .field("public", &self.public)
            .field("private", &"<redacted>")
            .finish()
    }
}

impl Drop for Keypair {
    fn drop(&mut self) {
        for b in self.private.iter_mut() {
            // SAFETY: `b` is a valid, aligned, exclusive reference to a byte we own. The
            // volatile write keeps the compiler from eliding the wipe of a dying value.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// X25519 public key of a private key (through snow's own Curve25519 implementation, so the
/// handshake and key files can never disagree).
fn derive_public(private: &[u8; KEY_LEN]) -> PublicKey {
    let mut dh = DefaultResolver
        .resolve_dh(&DHChoice::Curve25519)
        .expect("snow's default resolver always provides Curve25519");
    dh.set(private);
    let mut public = [0u8; KEY_LEN];
    public.copy_from_slice(dh.pubkey());
    PublicKey(public)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes exactly one canonical base64 encoding of a 32-byte key: 42 data characters, one
/// character carrying 4 data bits and 2 zero bits, then one `=`.
fn decode_key(text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let chars = text.chars().count();
    if chars != KEY_TEXT_LEN {
        return Err(KeyError::Length(chars));
    }
    // The length check above counts characters; a non-ASCII character makes the byte length
    // differ, so report it precisely.
    if let Some((pos, ch)) = text.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
        return Err(KeyError::Character { ch, pos });
    }
    let bytes = text.as_bytes();
    if bytes[KEY_TEXT_LEN - 1] != b'=' {
        return Err(KeyError::Character {
            ch: bytes[KEY_TEXT_LEN - 1] as char,
            pos: KEY_TEXT_LEN - 1,
        });
    }
    let mut values = [0u32; KEY_TEXT_LEN - 1];
    for (pos, (&c, v)) in bytes.iter().zip(values.iter_mut()).enumerate() {
        *v = base64_value(c).ok_or(KeyError::Character { ch: c as char, pos })?;
    }
    if values[KEY_TEXT_LEN - 2] & 0b11 != 0 {
        return Err(KeyError::NonCanonical);
    }
    let mut out = [0u8; KEY_LEN];
    // Ten full groups of 4 characters -> 30 bytes.
    for g in 0..10 {
        let v = &values[4 * g..4 * g + 4];
        let n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
        out[3 * g] = (n >> 16) as u8;
        out[3 * g + 1] = (n >> 8) as u8;
        out[3 * g + 2] = n as u8;
    }
    // Final group: three characters carry 18 bits, of which the top 16 are data.
    let n = (values[40] << 18) | (values[41] << 12) | (values[42] << 6);
    out[30] = (n >> 16) as u8;
    out[31] = (n >> 8) as u8;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    #[test]
    #[cfg(unix)]
    fn a_written_key_file_is_private_and_reads_back() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("horde-key-{}.key", std::process::id()));
        std::fs::write(&path, "an older, world-readable file").unwrap();
        let kp = Keypair::generate();
        kp.write_file(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Keypair = text.parse().unwrap();
        assert_eq!(back.public(), kp.public());
        std::fs::remove_file(&path).unwrap();
        // A file created by it is 0600 from the start.
        kp.write_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        std::fs::remove_file(&path).unwrap();
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn known_x25519_public_key() {
        // RFC 7748 section 6.1, Alice's key pair.
        let private = hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let public = hex32("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        assert_eq!(Keypair::from_private(private).public().as_bytes(), &public);
    }

    fn hex32(s: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn key_file_round_trip() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let pair = Keypair::generate_with(&mut rng);
        let text = pair.to_file_string();
        let back: Keypair = text.parse().unwrap();
        assert_eq!(back.public(), pair.public());
        assert_eq!(back.private_bytes(), pair.private_bytes());
        // A file with only the private key is enough.
        let private_line = text.lines().find(|l| l.starts_with("PrivateKey")).unwrap();
        let back: Keypair = private_line.parse().unwrap();
        assert_eq!(back.public(), pair.public());
    }

    #[test]
    fn generated_keys_differ() {
        assert_ne!(Keypair::generate().public(), Keypair::generate().public());
    }

    #[test]
    fn debug_hides_private_key() {
        let pair = Keypair::from_private([7; 32]);
        let shown = format!("{pair:?}");
        assert!(shown.contains("<redacted>"));
        assert!(!shown.contains(&base64_encode(&[7; 32])));
    }

    #[test]
    fn key_file_errors_name_the_line() {
        let a = Keypair::from_private([1; 32]);
        let b = Keypair::from_private([2; 32]);
        let priv_a = format!("PrivateKey = {}", base64_encode(a.private_bytes()));
        let pub_b = format!("PublicKey = {}", b.public());

        let mismatch = format!("# c\n\n{priv_a}\n{pub_b}\n");
        assert_eq!(
            mismatch.parse::<Keypair>().unwrap_err(),
            KeyError::Mismatch { line: 4 }
        );

        assert_eq!(
            "".parse::<Keypair>().unwrap_err(),
            KeyError::MissingPrivateKey
        );
        assert_eq!(
            format!("{pub_b}\n").parse::<Keypair>().unwrap_err(),
            KeyError::MissingPrivateKey
        );
        assert_eq!(
            format!("{priv_a}\njunk\n").parse::<Keypair>().unwrap_err(),
            KeyError::Syntax { line: 2 }
        );
        assert_eq!(
            format!("{priv_a}\n = x\n").parse::<Keypair>().unwrap_err(),
            KeyError::Syntax { line: 2 }
        );
        assert_eq!(
            format!("{priv_a}\n{priv_a}\n")
                .parse::<Keypair>()
                .unwrap_err(),
            KeyError::DuplicateField {
                line: 2,
                name: "PrivateKey"
            }
        );
        assert_eq!(
            format!("{priv_a}\nPeer = x\n")
                .parse::<Keypair>()
                .unwrap_err(),
            KeyError::UnknownField {
                line: 2,
                name: "Peer".into()
            }
        );
        let err = "PrivateKey = abc\n".parse::<Keypair>().unwrap_err();
        assert_eq!(
            err,
            KeyError::Field {
                line: 1,
                name: "PrivateKey",
                source: Box::new(KeyError::Length(3))
            }
        );
        assert_eq!(
            err.to_string(),
            format!("line 1: PrivateKey: {}", KeyError::Length(3))
        );
    }

    #[test]
    fn public_key_parse_errors() {
        let good = PublicKey::from_bytes([0xAB; 32]).to_string();
        assert_eq!(good.len(), KEY_TEXT_LEN);
        assert_eq!(
            format!("  {good}\n").parse::<PublicKey>().unwrap(),
            PublicKey([0xAB; 32])
        );
        assert_eq!("".parse::<PublicKey>().unwrap_err(), KeyError::Length(0));
        assert_eq!(
            good[..43].parse::<PublicKey>().unwrap_err(),
            KeyError::Length(43)
        );

        let mut bad = good.clone().into_bytes();
        bad[5] = b'!';
        assert_eq!(
            String::from_utf8(bad)
                .unwrap()
                .parse::<PublicKey>()
                .unwrap_err(),
            KeyError::Character { ch: '!', pos: 5 }
        );
        // Missing final padding.
        let unpadded = format!("{}A", &good[..43]);
        assert_eq!(
            unpadded.parse::<PublicKey>().unwrap_err(),
            KeyError::Character { ch: 'A', pos: 43 }
        );
        // Padding in the middle.
        let mid = format!("{}={}", &good[..10], &good[11..]);
        assert_eq!(
            mid.parse::<PublicKey>().unwrap_err(),
            KeyError::Character { ch: '=', pos: 10 }
        );
        // Non-ASCII of the right character count.
        let wide = format!("é{}", &good[1..]);
        assert_eq!(
            wide.parse::<PublicKey>().unwrap_err(),
            KeyError::Character { ch: 'é', pos: 0 }
        );
        // Last data character with padding bits set: 'r' (43) has low bits 11.
        let noncanon = format!("{}r=", &good[..42]);
        assert_eq!(
            noncanon.parse::<PublicKey>().unwrap_err(),
            KeyError::NonCanonical
        );
    }

    proptest! {
        #[test]
        fn base64_key_round_trip(bytes in any::<[u8; 32]>()) {
            let text = base64_encode(&bytes);
            prop_assert_eq!(text.len(), KEY_TEXT_LEN);
            prop_assert_eq!(decode_key(&text).unwrap(), bytes);
        }

        #[test]
        fn key_parsers_never_panic(text in ".{0,200}") {
            let _ = text.parse::<PublicKey>();
            let _ = text.parse::<Keypair>();
        }

        #[test]
        fn only_canonical_text_decodes(text in "[A-Za-z0-9+/=]{44}") {
            if let Ok(bytes) = decode_key(&text) {
                prop_assert_eq!(base64_encode(&bytes), text);
            }
        }
    }
}
