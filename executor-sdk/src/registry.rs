//! The registry loop: the executor announces itself to the admin (`/api/registry`) at once and then
//! every beat interval, and withdraws (`/api/registryRemove`) when it shuts down.
//!
//! Each beat goes to the admins in order and stops at the first that accepts it: admins of one
//! cluster share a database, so one is enough. Unlike XXL-JOB 3.4.1+, beats are not aligned to
//! wall-clock multiples of the interval, so a fleet started together does not beat in one herd.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::admin_client::AdminClient;
use crate::protocol::RegistryRequest;

/// Shortest beat interval accepted; a zero interval would spin.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Starts the registry loop. It beats until `shutdown` is cancelled, then sends `registryRemove`
/// once and returns. A beat in flight when `shutdown` fires is finished first, so the removal
/// cannot overtake it at the admin.
///
/// A request with a blank group, appname or address is refused by every admin ("Illegal
/// Argument."); the loop reports it and ends at once instead of beating in vain.
pub fn spawn(
    admin: AdminClient,
    request: RegistryRequest,
    interval: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = request.validate() {
            tracing::error!(
                appname = %request.registry_key,
                address = %request.registry_value,
                error = e,
                "registry request is incomplete, not registering"
            );
            return;
        }
        let mut ticker = tokio::time::interval(interval.max(MIN_INTERVAL));
        // After a slow beat, wait a whole interval again rather than beating twice in a row.
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                _ = ticker.tick() => {}
            }
            match admin.call("registry", &request).await {
                Ok(_) => {
                    if failing {
                        tracing::info!(appname = %request.registry_key, "registry beat accepted again");
                    }
                    failing = false;
                    tracing::debug!(appname = %request.registry_key, address = %request.registry_value, "registry beat sent");
                }
                Err(e) => {
                    failing = true;
                    tracing::warn!(appname = %request.registry_key, error = %e, "registry beat failed, will retry");
                }
            }
        }
        match admin.call("registryRemove", &request).await {
            Ok(_) => tracing::info!(
                appname = %request.registry_key,
                address = %request.registry_value,
                "executor deregistered"
            ),
            Err(e) => tracing::warn!(
                appname = %request.registry_key,
                error = %e,
                "registryRemove failed; the admin evicts the executor when its beats stop"
            ),
        }
    })
}

/// The address this executor registers (`http://ip:port/`).
///
/// An explicit address wins (for containers and NAT; a missing scheme gets `http://`, and a
/// trailing `/` is added). Otherwise the `ip` override, else the first non-loopback, non-link-local
/// IPv4 address of the machine's interfaces (read locally, no packet is sent), else `127.0.0.1`.
/// IPv6 addresses are written in brackets.
pub fn detect_address(explicit: Option<&str>, ip: Option<&str>, port: u16) -> String {
    if let Some(explicit) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
        let mut address = if explicit.contains("://") {
            explicit.to_string()
        } else {
            format!("http://{explicit}")
        };
        if !address.ends_with('/') {
            address.push('/');
        }
        return address;
    }
    let host = match ip.map(str::trim).filter(|s| !s.is_empty()) {
        Some(ip) => host_literal(ip),
        None => host_literal(&local_ipv4().unwrap_or(Ipv4Addr::LOCALHOST).to_string()),
    };
    format!("http://{host}:{port}/")
}

/// Brackets a bare IPv6 literal; host names and IPv4 addresses are left as they are.
fn host_literal(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_string(),
    }
}

fn local_ipv4() -> Option<Ipv4Addr> {
    let interfaces = match if_addrs::get_if_addrs() {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list network interfaces, registering 127.0.0.1");
            return None;
        }
    };
    first_usable_ipv4(interfaces.iter().map(|i| i.ip()))
}

fn first_usable_ipv4(addresses: impl IntoIterator<Item = IpAddr>) -> Option<Ipv4Addr> {
    addresses.into_iter().find_map(|ip| match ip {
        IpAddr::V4(v4)
            if !v4.is_loopback()
                && !v4.is_link_local()
                && !v4.is_unspecified()
                && !v4.is_broadcast() =>
        {
            Some(v4)
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_address_wins_and_is_normalised() {
        assert_eq!(
            detect_address(Some("http://10.1.2.3:8081"), Some("10.9.9.9"), 9999),
            "http://10.1.2.3:8081/"
        );
        assert_eq!(
            detect_address(Some("https://exec.example/"), None, 9999),
            "https://exec.example/"
        );
        assert_eq!(
            detect_address(Some("exec-1:9999"), None, 1),
            "http://exec-1:9999/"
        );
        // A blank explicit address does not count.
        assert_eq!(
            detect_address(Some("  "), Some("10.0.0.7"), 9999),
            "http://10.0.0.7:9999/"
        );
    }

    #[test]
    fn ipv6_goes_in_brackets() {
        assert_eq!(
            detect_address(None, Some("fe80::1"), 9999),
            "http://[fe80::1]:9999/"
        );
        assert_eq!(
            detect_address(None, Some("[2001:db8::5]"), 80),
            "http://[2001:db8::5]:80/"
        );
        assert_eq!(
            detect_address(None, Some("node-a.local"), 80),
            "http://node-a.local:80/"
        );
    }

    #[test]
    fn detected_address_is_a_usable_ipv4() {
        let address = detect_address(None, None, 9999);
        let host = address
            .strip_prefix("http://")
            .and_then(|a| a.strip_suffix(":9999/"))
            .unwrap();
        let ip: Ipv4Addr = host.parse().unwrap();
        // 127.0.0.1 only when the machine has no other address.
        if ip.is_loopback() {
            assert_eq!(ip, Ipv4Addr::LOCALHOST);
        } else {
            assert!(!ip.is_link_local());
        }
    }

    #[test]
    fn interface_choice_skips_loopback_link_local_and_v6() {
        let list: Vec<IpAddr> = vec![
            "127.0.0.1".parse().unwrap(),
            "::1".parse().unwrap(),
            "169.254.3.4".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            "10.0.0.5".parse().unwrap(),
            "192.168.1.9".parse().unwrap(),
        ];
        assert_eq!(first_usable_ipv4(list), Some(Ipv4Addr::new(10, 0, 0, 5)));
        assert_eq!(
            first_usable_ipv4(vec!["127.0.0.1".parse::<IpAddr>().unwrap()]),
            None
        );
    }
}
