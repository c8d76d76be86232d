//! Rate-scope tokens: the control plane mints one per bucket with the
//! gateway's secret, and a gateway with a secret serves a bucket only to a
//! request carrying a valid, unexpired token for exactly that bucket. One org
//! can then never draw from, release into or penalize another's bucket.
//!
//! Format: `v1.<expiresAtMs>.<hex HMAC-SHA256(secret, "paceline-scope\nv1\n<expiresAtMs>\n<bucketId>")>`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

const VERSION: &str = "v1";

fn mac_for(secret: &[u8], bucket_id: &str, expires_at_ms: u64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(format!("paceline-scope\n{VERSION}\n{expires_at_ms}\n{bucket_id}").as_bytes());
    mac
}

pub fn mint_rate_scope_token(secret: &[u8], bucket_id: &str, expires_at_ms: u64) -> String {
    let tag = mac_for(secret, bucket_id, expires_at_ms)
        .finalize()
        .into_bytes();
    let mut hex = String::with_capacity(tag.len() * 2);
    for byte in tag.iter() {
        hex.push_str(&format!("{byte:02x}"));
    }
    format!("{VERSION}.{expires_at_ms}.{hex}")
}

/// Checks `token` for `bucket_id` at `now_ms`. Every failure is
/// `FORBIDDEN_SCOPE`; the message says which check failed but never echoes
/// the expected tag.
pub fn verify_rate_scope_token(
    secret: &[u8],
    bucket_id: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Result<()> {
    let token = token.ok_or_else(|| {
        Error::forbidden(format!(
            "bucket {bucket_id} requires a rateScopeToken and the request has none"
        ))
    })?;
    let malformed = || Error::forbidden(format!("rateScopeToken for {bucket_id} is malformed"));
    let mut parts = token.splitn(3, '.');
    let (Some(VERSION), Some(expiry), Some(tag_hex)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let expires_at_ms: u64 = expiry.parse().map_err(|_| malformed())?;
    let tag = decode_hex(tag_hex).ok_or_else(malformed)?;
    if expires_at_ms <= now_ms {
        return Err(Error::forbidden(format!(
            "rateScopeToken for {bucket_id} expired at {expires_at_ms} (now {now_ms})"
        )));
    }
    // verify_slice compares in constant time.
    mac_for(secret, bucket_id, expires_at_ms)
        .verify_slice(&tag)
        .map_err(|_| Error::forbidden(format!("rateScopeToken does not grant bucket {bucket_id}")))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    const SECRET: &[u8] = b"control-plane-secret";

    #[test]
    fn a_minted_token_verifies_for_its_bucket_until_it_expires() {
        let token = mint_rate_scope_token(SECRET, "org_a:apollo", 5_000);
        assert!(token.starts_with("v1.5000."));
        assert!(verify_rate_scope_token(SECRET, "org_a:apollo", Some(&token), 4_999).is_ok());
        let expired = verify_rate_scope_token(SECRET, "org_a:apollo", Some(&token), 5_000);
        assert!(expired.unwrap_err().message.contains("expired at 5000"));
    }

    #[test]
    fn a_token_for_another_bucket_or_secret_is_forbidden() {
        let token = mint_rate_scope_token(SECRET, "org_a:apollo", 5_000);
        let other = verify_rate_scope_token(SECRET, "org_b:apollo", Some(&token), 0).unwrap_err();
        assert_eq!(other.code, ErrorCode::ForbiddenScope);
        let forged = mint_rate_scope_token(b"guess", "org_b:apollo", 5_000);
        assert!(verify_rate_scope_token(SECRET, "org_b:apollo", Some(&forged), 0).is_err());
    }

    #[test]
    fn a_stretched_expiry_breaks_the_tag() {
        let token = mint_rate_scope_token(SECRET, "org_a:apollo", 5_000);
        let stretched = token.replacen("5000", "9999999", 1);
        assert!(verify_rate_scope_token(SECRET, "org_a:apollo", Some(&stretched), 6_000).is_err());
    }

    #[test]
    fn missing_and_malformed_tokens_are_forbidden() {
        for token in [
            None,
            Some("v1.abc.00"),
            Some("v2.5000.00"),
            Some("v1.5000.zz"),
        ] {
            let e = verify_rate_scope_token(SECRET, "b", token, 0).unwrap_err();
            assert_eq!(e.code, ErrorCode::ForbiddenScope, "{token:?}");
        }
    }
}
