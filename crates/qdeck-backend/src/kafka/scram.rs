//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as a Kafka client speaks them: the
//! client's half of the exchange, with no channel binding (`n,,`). Pure functions over bytes,
//! so the arithmetic is checked against the RFC's own example without a broker. The password
//! is taken as given (no SASLprep): Kafka's Java client does not normalise it either, so a
//! password works here exactly when it works there.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length, so `new_from_slice` cannot fail here.
        match self {
            Hash::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            Hash::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// PBKDF2 with this HMAC, one block (SCRAM's `Hi`): the output is one hash long.
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut first = salt.to_vec();
        first.extend_from_slice(&1u32.to_be_bytes());
        let mut u = self.hmac(password, &first);
        let mut out = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &u);
            out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
        }
        out
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A user name as SCRAM writes it: `=` and `,` escaped.
fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// The client's side of one SCRAM exchange.
pub struct Client {
    hash: Hash,
    nonce: String,
    first_bare: String,
    /// What the server must prove it knows, once the client's final message is made.
    server_signature: Option<Vec<u8>>,
}

/// Kafka refuses fewer than 4096 iterations; a server asking for more than this is not one
/// qdeck should spend seconds of CPU on.
const MAX_ITERATIONS: u32 = 1 << 20;

impl Client {
    pub fn new(hash: Hash, user: &str, nonce: &str) -> Client {
        Client {
            hash,
            nonce: nonce.to_string(),
            first_bare: format!("n={},r={nonce}", saslname(user)),
            server_signature: None,
        }
    }

    /// `client-first-message`.
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// `client-final-message` for the server's first message; errors say what was wrong with
    /// the server's message, never anything about the password.
    pub fn last(&mut self, server_first: &[u8], password: &str) -> Result<Vec<u8>, String> {
        let sf = std::str::from_utf8(server_first)
            .map_err(|_| "the server's first SCRAM message is not UTF-8".to_string())?;
        let attr = |k: &str| {
            sf.split(',')
                .find_map(|a| a.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        if let Some(e) = attr("e") {
            return Err(format!("the server refused: {e}"));
        }
        let nonce = attr("r").ok_or("the server's first SCRAM message has no nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's SCRAM nonce does not extend the client's".into());
        }
        let salt = attr("s")
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .ok_or("the server's first SCRAM message has no valid salt")?;
        let iterations: u32 = attr("i")
            .and_then(|i| i.parse().ok())
            .filter(|i| (1..=MAX_ITERATIONS).contains(i))
            .ok_or("the server's SCRAM iteration count is missing or out of range")?;
        let salted = self.hash.hi(password.as_bytes(), &salt, iterations);
        let client_key = self.hash.hmac(&salted, b"Client Key");
        let stored_key = self.hash.digest(&client_key);
        // `biws` is base64 of `n,,`: no channel binding, no authorisation identity.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{sf},{without_proof}", self.first_bare);
        let signature = self.hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.hash.hmac(&salted, b"Server Key");
        self.server_signature = Some(self.hash.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", b64(&proof)).into_bytes())
    }

    /// Check the server's final message: it proves the server knew the password too.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), String> {
        let sf = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final SCRAM message is not UTF-8".to_string())?;
        if let Some(e) = sf.strip_prefix("e=") {
            return Err(format!("the server refused: {e}"));
        }
        let v = sf
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
            .ok_or("the server's final SCRAM message has no verifier")?;
        match &self.server_signature {
            Some(want) if *want == v => Ok(()),
            _ => Err("the server's SCRAM signature does not match: it does not know this user's credentials".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil", 4096 iterations.
    #[test]
    fn rfc_7677_example_exchange() {
        let mut c = Client::new(Hash::Sha256, "user", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = c.last(server_first, "pencil").unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert!(c
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_ok());
        assert!(c
            .verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());
    }

    #[test]
    fn a_server_nonce_not_extending_ours_is_refused() {
        let mut c = Client::new(Hash::Sha512, "a,b=c", "abc");
        assert_eq!(c.first(), b"n,,n=a=2Cb=3Dc,r=abc");
        let e = c.last(b"r=xyz123,s=AAAA,i=4096", "pw").unwrap_err();
        assert!(e.contains("nonce"), "{e}");
        let e = c.last(b"r=abc1,s=AAAA,i=0", "pw").unwrap_err();
        assert!(e.contains("iteration"), "{e}");
        assert!(!e.contains("pw"));
    }
}
