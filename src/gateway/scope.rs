//! Scope tokens: the control plane mints one per bucket (rate) or per run
//! (budget) with the gateway's secret, and a gateway with a secret serves a
//! bucket or a run only to a request carrying a valid, unexpired token for
//! exactly that id. One org can then never draw from, release into or
//! penalize another's bucket, nor spend another run's budget.
//!
//! Format: `v1.<expiresAtMs>.<hex HMAC-SHA256(secret, "<domain>\nv1\n<expiresAtMs>\n<id>")>`
//! with the domain `paceline-scope` for buckets and `paceline-run-scope` for
//! runs, so a token for one never passes as the other. Exactly one text
//! verifies per token: the expiry in plain decimal (no sign, no leading
//! zero) and the tag in lowercase hex. A token may live at most
//! [`MAX_TOKEN_LIFETIME_MS`] past the time it is checked, so a leaked token
//! cannot be made to last for ever.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

const VERSION: &str = "v1";

/// The longest a token may still have to live when it is checked: 7 days.
/// Mint tokens for less; the control plane can always mint a fresh one.
pub const MAX_TOKEN_LIFETIME_MS: u64 = 7 * 24 * 3_600_000;

/// What a token grants: one bucket's rate calls, or one run's charges.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    Rate,
    Run,
}

impl Scope {
    fn domain(self) -> &'static str {
        match self {
            Scope::Rate => "paceline-scope",
            Scope::Run => "paceline-run-scope",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Scope::Rate => "rateScopeToken",
            Scope::Run => "runScopeToken",
        }
    }

    fn subject(self) -> &'static str {
        match self {
            Scope::Rate => "bucket",
            Scope::Run => "run",
        }
    }
}

fn mac_for(secret: &[u8], scope: Scope, id: &str, expires_at_ms: u64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(format!("{}\n{VERSION}\n{expires_at_ms}\n{id}", scope.domain()).as_bytes());
    mac
}

fn mint(secret: &[u8], scope: Scope, id: &str, expires_at_ms: u64) -> String {
    let tag = mac_for(secret, scope, id, expires_at_ms)
        .finalize()
        .into_bytes();
    let mut hex = String::with_capacity(tag.len() * 2);
    for byte in tag.iter() {
        hex.push_str(&format!("{byte:02x}"));
    }
    format!("{VERSION}.{expires_at_ms}.{hex}")
}

/// A token for `bucket_id`'s rate calls (acquire, release, penalize, view).
pub fn mint_rate_scope_token(secret: &[u8], bucket_id: &str, expires_at_ms: u64) -> String {
    mint(secret, Scope::Rate, bucket_id, expires_at_ms)
}

/// A token for the budget charges of the run `root_run_id`.
pub fn mint_run_scope_token(secret: &[u8], root_run_id: &str, expires_at_ms: u64) -> String {
    mint(secret, Scope::Run, root_run_id, expires_at_ms)
}

/// Checks a rate-scope token for `bucket_id` at `now_ms`.
pub fn verify_rate_scope_token(
    secret: &[u8],
    bucket_id: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Result<()> {
    verify(secret, Scope::Rate, bucket_id, token, now_ms)
}

/// Checks a run-scope token for `root_run_id` at `now_ms`.
pub fn verify_run_scope_token(
    secret: &[u8],
    root_run_id: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Result<()> {
    verify(secret, Scope::Run, root_run_id, token, now_ms)
}

/// Every failure is `FORBIDDEN_SCOPE`; the message says which check failed
/// but never echoes the expected tag.
pub(crate) fn verify(
    secret: &[u8],
    scope: Scope,
    id: &str,
    token: Option<&str>,
    now_ms: u64,
) -> Result<()> {
    let (field, subject) = (scope.field(), scope.subject());
    let token = token.ok_or_else(|| {
        Error::forbidden(format!(
            "{subject} {id} requires a {field} and the request has none"
        ))
    })?;
    let malformed = || Error::forbidden(format!("{field} for {subject} {id} is malformed"));
    // A closure, not a `char` pattern: a `char` pattern brings core's
    // searcher for it into the wasm (0.6 KB).
    #[allow(clippy::manual_pattern_char_comparison)]
    let mut parts = token.splitn(3, |c| c == '.');
    let (Some(VERSION), Some(expiry), Some(tag_hex)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let expires_at_ms = canonical_decimal(expiry).ok_or_else(malformed)?;
    let tag = decode_lower_hex(tag_hex).ok_or_else(malformed)?;
    if expires_at_ms <= now_ms {
        return Err(Error::forbidden(format!(
            "{field} for {subject} {id} expired at {expires_at_ms} (now {now_ms})"
        )));
    }
    if expires_at_ms - now_ms > MAX_TOKEN_LIFETIME_MS {
        return Err(Error::forbidden(format!(
            "{field} for {subject} {id} expires at {expires_at_ms}, more than \
             {MAX_TOKEN_LIFETIME_MS} ms after now ({now_ms}); mint tokens that live at most 7 days"
        )));
    }
    // verify_slice compares in constant time.
    mac_for(secret, scope, id, expires_at_ms)
        .verify_slice(&tag)
        .map_err(|_| Error::forbidden(format!("{field} does not grant {subject} {id}")))
}

/// The number written the one way `mint` writes it: ASCII digits, no sign,
/// no leading zero.
fn canonical_decimal(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    if !digits_only || leading_zero {
        return None;
    }
    text.parse().ok()
}

fn decode_lower_hex(text: &str) -> Option<Vec<u8>> {
    let lower = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    if text.len() != 64 {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(lower(pair[0])? << 4 | lower(pair[1])?))
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

    #[test]
    fn scope_tokens_malleable_only_the_canonical_text_verifies() {
        let token = mint_rate_scope_token(SECRET, "b", 1_060_000);
        assert!(verify_rate_scope_token(SECRET, "b", Some(&token), 1_000_000).is_ok());
        let tag = token.rsplit('.').next().unwrap();
        for variant in [
            format!("v1.1060000.{}", tag.to_uppercase()),
            format!("v1.+1060000.{tag}"),
            format!("v1.0001060000.{tag}"),
            format!("v1.1060000 .{tag}"),
            format!("v1.1060000.{tag}0"),
        ] {
            let e = verify_rate_scope_token(SECRET, "b", Some(&variant), 1_000_000).unwrap_err();
            assert_eq!(e.code, ErrorCode::ForbiddenScope, "{variant}");
            assert!(e.message.contains("malformed"), "{variant}: {}", e.message);
        }
    }

    #[test]
    fn scope_tokens_immortal_a_token_living_past_the_maximum_lifetime_is_refused() {
        let now = 1_767_225_600_000;
        let forever = mint_rate_scope_token(SECRET, "b", u64::MAX);
        let e = verify_rate_scope_token(SECRET, "b", Some(&forever), now).unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope);
        assert!(e.message.contains("at most 7 days"), "{}", e.message);
        let week = mint_rate_scope_token(SECRET, "b", now + MAX_TOKEN_LIFETIME_MS);
        assert!(verify_rate_scope_token(SECRET, "b", Some(&week), now).is_ok());
        let over = mint_rate_scope_token(SECRET, "b", now + MAX_TOKEN_LIFETIME_MS + 1);
        assert!(verify_rate_scope_token(SECRET, "b", Some(&over), now).is_err());
    }

    #[test]
    fn a_rate_token_is_no_run_token_for_the_same_id() {
        let rate = mint_rate_scope_token(SECRET, "x", 5_000);
        let run = mint_run_scope_token(SECRET, "x", 5_000);
        assert_ne!(rate, run);
        assert!(verify_run_scope_token(SECRET, "x", Some(&run), 0).is_ok());
        let e = verify_run_scope_token(SECRET, "x", Some(&rate), 0).unwrap_err();
        assert_eq!(e.code, ErrorCode::ForbiddenScope);
        assert!(verify_rate_scope_token(SECRET, "x", Some(&run), 0).is_err());
    }
}
