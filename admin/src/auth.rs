//! Passwords (argon2), API tokens (random secrets stored as SHA-256) and the first-start admin user.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use rand::distributions::Alphanumeric;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::model::{now_ms, Role};
use crate::refusal::{Reason, Refusal};
use crate::store::Store;

/// Prefix of every API token, so leaked ones are easy to recognise and grep for.
pub const TOKEN_PREFIX: &str = "sl_";

/// Hashes a password with argon2id and a random salt (PHC string).
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("cannot hash password: {e}"))
}

/// Checks a password against a stored PHC hash; a malformed hash never matches.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Argon2 is deliberately slow; run it off the async workers.
pub async fn hash_password_async(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || hash_password(&password)).await?
}

pub async fn verify_password_async(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

/// A random alphanumeric secret of `len` characters.
pub fn random_secret(len: usize) -> String {
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

/// A new API token: the secret shown once, and what is stored (hash, display prefix).
pub fn new_api_token() -> (String, String, String) {
    let secret = format!("{TOKEN_PREFIX}{}", random_secret(40));
    let hash = token_hash(&secret);
    let prefix = secret[..8].to_string();
    (secret, hash, prefix)
}

/// SHA-256 hex of a token. Tokens are long random strings, so a fast hash is enough (unlike passwords).
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Rules for a password a person chooses.
pub fn check_password_strength(password: &str) -> Result<(), Refusal> {
    const MIN_CHARS: usize = 8;
    if password.chars().count() < MIN_CHARS {
        return Err(Refusal::new(Reason::PasswordShort).with("min", MIN_CHARS));
    }
    Ok(())
}

/// Creates the `admin` user when there is no user at all. The password comes from
/// `SHARDLINE_ADMIN_PASSWORD`; without it a random one-time password is printed once and must be
/// changed at first login. Returns the printed password, if any.
pub async fn ensure_admin_user(
    store: &Store,
    configured: Option<&str>,
) -> anyhow::Result<Option<String>> {
    if store.count_users().await? > 0 {
        return Ok(None);
    }
    let (password, one_time) = match configured {
        Some(p) if !p.is_empty() => (p.to_string(), false),
        _ => (random_secret(16), true),
    };
    let hash = hash_password_async(password.clone()).await?;
    match store
        .create_user("admin", &hash, Role::Admin.as_str(), "", one_time, now_ms())
        .await
    {
        Ok(_) => Ok(one_time.then_some(password)),
        // Another admin process created it at the same moment.
        Err(crate::store::StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_round_trip() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("x", "not a hash"));
    }

    #[test]
    fn tokens() {
        let (secret, hash, prefix) = new_api_token();
        assert!(secret.starts_with("sl_") && secret.len() == 43);
        assert_eq!(token_hash(&secret), hash);
        assert!(secret.starts_with(&prefix));
        assert_ne!(new_api_token().0, secret);
        assert!(check_password_strength("short").is_err());
    }
}
