//! Alarms for failed fires, sent once per failed fire after its retries, to each of the job's
//! targets: webhooks (the generic JSON shape, or the DingTalk, WeCom, Feishu and Slack shapes,
//! chosen by the target URL) and e-mail through the configured SMTP relay.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::{header::ContentType, Mailbox};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::{json, Value};

use crate::config::Settings;
use crate::model::{now_ms, Fire, Job, Run};
use crate::refusal::{Reason, Refusal};
use crate::store::{FireEnded, Store, StoreResult};

/// A fire's `alarm_state`, with XXL-JOB's values (its `alarm_status`): 0 until the fire's
/// retries are used up, then one of these.
pub mod state {
    /// Claimed by the admin sending it. One that stopped or died first leaves the fire here,
    /// and its follow-up: another admin sends the alarm once [`super::SENDING_LEASE_MS`] passed.
    pub const SENDING: i64 = -1;
    /// The job has no alarm target.
    pub const NONE_NEEDED: i64 = 1;
    /// Every target took it.
    pub const SENT: i64 = 2;
    /// A target did not take it, after [`super::RETRY_DELAYS`].
    pub const FAILED: i64 = 3;
}

/// The pauses between attempts to send one alarm to one target: a relay or chat service that
/// is down for a few seconds still gets it.
pub const RETRY_DELAYS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// How long sending one alarm may take, every target and try together; the targets not reached
/// by then count as failed. It bounds how long a live admin holds an alarm in [`state::SENDING`].
const SEND_DEADLINE: Duration = Duration::from_secs(120);

/// How long after its claim an alarm still in [`state::SENDING`] is left to the admin that
/// claimed it. Past it that admin stopped or died before it was done (a live one is done within
/// `SEND_DEADLINE`), and the next admin to sweep the fire's follow-up sends it again: an alarm
/// goes out at least once, where XXL-JOB's stays unsent.
pub const SENDING_LEASE_MS: i64 = 300_000;

/// One of a job's alarm targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Webhook(String),
    Email(Address),
}

/// Parses a job's comma-separated alarm targets: each is an `http(s)://` URL or an e-mail address
/// (optionally as `mailto:`). The message names the first target that is neither.
pub fn parse_targets(list: &str) -> Result<Vec<Target>, Refusal> {
    list.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            if t.starts_with("http://") || t.starts_with("https://") {
                reqwest::Url::parse(t)
                    .map(|_| Target::Webhook(t.to_string()))
                    .map_err(|e| {
                        Refusal::new(Reason::BadUrl)
                            .with("value", format_args!("{t:?}"))
                            .with("detail", e)
                    })
            } else {
                let addr = t.strip_prefix("mailto:").unwrap_or(t);
                addr.parse::<Address>().map(Target::Email).map_err(|_| {
                    Refusal::new(Reason::NotAlarmTarget).with("value", format_args!("{t:?}"))
                })
            }
        })
        .collect()
}

/// Which body a webhook target expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Generic,
    DingTalk,
    WeCom,
    Feishu,
    Slack,
}

impl Shape {
    pub fn of(url: &str) -> Shape {
        let host = url
            .split("://")
            .nth(1)
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("");
        if host.ends_with("dingtalk.com") {
            Shape::DingTalk
        } else if host.ends_with("qyapi.weixin.qq.com") {
            Shape::WeCom
        } else if host.ends_with("feishu.cn") || host.ends_with("larksuite.com") {
            Shape::Feishu
        } else if host.ends_with("hooks.slack.com") {
            Shape::Slack
        } else {
            Shape::Generic
        }
    }
}

/// One line per item that did not succeed (the first ten), for the texts below.
fn failed_items(runs: &[Run]) -> Vec<String> {
    runs.iter()
        .filter(|r| r.superseded == 0 && r.state != "succeeded")
        .take(10)
        .map(|r| {
            let msg = if r.handle_msg.is_empty() {
                &r.trigger_msg
            } else {
                &r.handle_msg
            };
            let msg: String = msg.chars().take(200).collect();
            format!(
                "item {} on {}: {} ({msg})",
                r.shard_index, r.executor_address, r.state
            )
        })
        .collect()
}

/// The one-paragraph text of an alarm (the log line, and the chat services' message).
pub fn text(job: &Job, fire: &Fire, runs: &[Run]) -> String {
    format!(
        "Shardline: job {} \"{}\" fire {} failed (planned at {} ms, trigger {}). {}",
        job.id,
        job.name,
        fire.id,
        fire.planned_at,
        fire.trigger_type,
        failed_items(runs).join("; ")
    )
}

/// The body of an alarm e-mail: the same facts, a line each.
pub fn mail_body(job: &Job, fire: &Fire, runs: &[Run]) -> String {
    let planned = chrono::DateTime::from_timestamp_millis(fire.planned_at)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| format!("{} ms", fire.planned_at));
    let mut body = format!(
        "Job {} \"{}\" (group {}), fire {} failed after its retries.\n\
         Planned at: {planned}\n\
         Trigger: {}\n\n\
         Items that did not succeed:\n",
        job.id, job.name, job.group_id, fire.id, fire.trigger_type
    );
    for line in failed_items(runs) {
        body.push_str("- ");
        body.push_str(&line);
        body.push('\n');
    }
    body
}

/// The request body for a target of `shape`.
pub fn body(shape: Shape, job: &Job, fire: &Fire, runs: &[Run]) -> Value {
    let text = text(job, fire, runs);
    match shape {
        Shape::Generic => json!({
            "event": "fire_failed",
            "job_id": job.id,
            "job_name": job.name,
            "fire_id": fire.id,
            "planned_at": fire.planned_at,
            "trigger_type": fire.trigger_type,
            "failed_items": runs.iter().filter(|r| r.superseded == 0 && r.state != "succeeded").map(|r| json!({
                "item": r.shard_index, "executor": r.executor_address, "state": r.state,
                "message": if r.handle_msg.is_empty() { &r.trigger_msg } else { &r.handle_msg },
            })).collect::<Vec<_>>(),
            "text": text,
        }),
        Shape::DingTalk | Shape::WeCom => json!({"msgtype": "text", "text": {"content": text}}),
        Shape::Feishu => json!({"msg_type": "text", "content": {"text": text}}),
        Shape::Slack => json!({"text": text}),
    }
}

/// The e-mail side: the SMTP relay and the sender.
struct Mail {
    relay: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

/// Sends alarms. Built at start-up (and by `Settings::validate`, which only checks that it can
/// be), where a bad SMTP setting stops the admin with its reason.
pub struct Alarms {
    timeout: Duration,
    /// Built at the first webhook: loading the system's trust roots costs memory an admin that
    /// never alarms need not hold.
    webhooks: tokio::sync::OnceCell<reqwest::Client>,
    mail: Option<Mail>,
    /// The alarms being sent, waited for at shutdown ([`Alarms::drain`]).
    sending: tokio_util::task::TaskTracker,
}

/// How long one e-mail may take (connect, TLS, the SMTP exchange): relays answer slower than
/// executors, and alarms are sent off the follow-up path.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

impl Alarms {
    pub fn new(settings: &Settings) -> anyhow::Result<Alarms> {
        let mail = match settings.smtp_url.as_deref().filter(|u| !u.is_empty()) {
            None => None,
            Some(url) => {
                let relay = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                    .map_err(|e| anyhow::anyhow!("SHARDLINE_SMTP_URL: {e}"))?
                    .timeout(Some(SMTP_TIMEOUT))
                    .build();
                let from = settings.smtp_from.as_deref().unwrap_or("");
                if from.is_empty() {
                    anyhow::bail!("SHARDLINE_SMTP_FROM (the alarms' sender address) is required with SHARDLINE_SMTP_URL");
                }
                let from = from
                    .parse::<Mailbox>()
                    .map_err(|e| anyhow::anyhow!("SHARDLINE_SMTP_FROM {from:?}: {e}"))?;
                Some(Mail { relay, from })
            }
        };
        Ok(Alarms {
            timeout: settings.dispatch_timeout(),
            webhooks: tokio::sync::OnceCell::new(),
            mail,
            sending: tokio_util::task::TaskTracker::new(),
        })
    }

    /// Raises the alarm of a fire that failed for good (`ended`, its end whose follow-up this
    /// is): claims it (so that of two admins, or a follow-up done twice, one sends it) and sends
    /// it to every target of its job, in a task of its own so that a slow relay or webhook does
    /// not hold back the other fires' follow-ups. Each target gets [`RETRY_DELAYS`] more tries;
    /// the fire's `alarm_state` ends as [`state::SENT`] or [`state::FAILED`].
    ///
    /// Returns whether the follow-up is done. While an alarm is being sent it is not: the
    /// sending task clears it once the outcome is stored, so an admin that stops or dies first
    /// leaves it, and an alarm claimed longer than [`SENDING_LEASE_MS`] ago is taken over here.
    pub async fn raise(
        self: &Arc<Self>,
        store: &Store,
        job: &Job,
        fire: &Fire,
        runs: &[Run],
        ended: &FireEnded,
    ) -> StoreResult<bool> {
        let targets = parse_targets(&job.alarm_targets).unwrap_or_else(|e| {
            // Jobs are checked when saved; this is a row written otherwise.
            tracing::warn!(job_id = job.id, error = %e, "alarm targets unreadable; no alarm sent");
            Vec::new()
        });
        let claimed = if targets.is_empty() {
            state::NONE_NEEDED
        } else {
            state::SENDING
        };
        // The follow-up's time is the start of the lease: moved to the claim, so that a
        // follow-up found late by a sweep (its admin died before claiming) is not taken over at
        // once from the admin sending it now.
        let now = now_ms();
        let end = FireEnded { at: now, ..*ended };
        if store.move_alarm_state(fire.id, 0, claimed).await? {
            let text = text(job, fire, runs);
            tracing::warn!(job_id = job.id, fire_id = fire.id, "{text}");
            if targets.is_empty() {
                return Ok(true);
            }
            store.renew_follow_up(fire.id, ended.at, now).await?;
        } else {
            // Claimed before: sent, or being sent by an admin within its lease, or left by one
            // that stopped or died. Only the last is taken over, by one admin: the one that
            // moves the follow-up's time on (compare-and-set).
            if fire.alarm_state != state::SENDING {
                return Ok(true);
            }
            if ended.at > now - SENDING_LEASE_MS
                || !store.renew_follow_up(fire.id, ended.at, now).await?
            {
                return Ok(false);
            }
            tracing::warn!(
                job_id = job.id,
                fire_id = fire.id,
                "alarm left unsent by an admin that stopped; sending it"
            );
            if targets.is_empty() {
                // The job's targets were removed since the claim.
                store
                    .move_alarm_state(fire.id, state::SENDING, state::NONE_NEEDED)
                    .await?;
                return Ok(true);
            }
        }
        let this = self.clone();
        let store = store.clone();
        let (job, fire, runs) = (job.clone(), fire.clone(), runs.to_vec());
        self.sending.spawn(async move {
            let send_all = async {
                let mut all = true;
                for target in &targets {
                    let mut tries = std::iter::once(Duration::ZERO).chain(RETRY_DELAYS);
                    let mut sent = false;
                    while let (false, Some(pause)) = (sent, tries.next()) {
                        tokio::time::sleep(pause).await;
                        sent = match target {
                            Target::Webhook(url) => this.post(url, &job, &fire, &runs).await,
                            Target::Email(to) => this.mail(to, &job, &fire, &runs).await,
                        };
                    }
                    all &= sent;
                }
                all
            };
            let all = tokio::time::timeout(SEND_DEADLINE, send_all)
                .await
                .unwrap_or_else(|_| {
                    tracing::warn!(fire_id = fire.id, "alarm not sent to every target in time");
                    false
                });
            let outcome = if all { state::SENT } else { state::FAILED };
            let stored = store
                .move_alarm_state(fire.id, state::SENDING, outcome)
                .await;
            // The follow-up is done once the outcome is stored; until then it stays for a sweep.
            let cleared = match stored {
                Ok(_) => store.follow_ups_done(&[end]).await,
                Err(e) => Err(e),
            };
            if let Err(e) = cleared {
                tracing::warn!(fire_id = fire.id, error = %e, "alarm outcome not stored");
            }
        });
        Ok(false)
    }

    /// Waits up to `within` for the alarms being sent (at shutdown, before the store closes).
    pub async fn drain(&self, within: Duration) {
        self.sending.close();
        if tokio::time::timeout(within, self.sending.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                alarms = self.sending.len(),
                "alarms still being sent at shutdown; the next admin sends them again"
            );
        }
    }

    /// One try of a webhook; true when it took the alarm.
    async fn post(&self, url: &str, job: &Job, fire: &Fire, runs: &[Run]) -> bool {
        let client = self
            .webhooks
            .get_or_try_init(|| async {
                // As for executors, a webhook's redirect is not followed.
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(self.timeout)
                    .build()
            })
            .await;
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(target = url, error = %e, "alarm webhook client failed");
                return false;
            }
        };
        let result = client
            .post(url)
            .timeout(self.timeout)
            .json(&body(Shape::of(url), job, fire, runs))
            .send()
            .await;
        match result {
            Ok(r) if r.status().is_success() => true,
            Ok(r) => {
                tracing::warn!(target = url, status = %r.status(), "alarm webhook refused");
                false
            }
            Err(e) => {
                tracing::warn!(target = url, error = %e, "alarm webhook failed");
                false
            }
        }
    }

    /// One try of an e-mail; true when the relay took it.
    async fn mail(&self, to: &Address, job: &Job, fire: &Fire, runs: &[Run]) -> bool {
        let Some(mail) = &self.mail else {
            tracing::warn!(target = %to, "e-mail alarm not sent: no SMTP relay is configured (SHARDLINE_SMTP_URL)");
            return false;
        };
        let message = Message::builder()
            .from(mail.from.clone())
            .to(Mailbox::new(None, to.clone()))
            .subject(format!(
                "Shardline alarm: job {} \"{}\" fire {} failed",
                job.id, job.name, fire.id
            ))
            .header(ContentType::TEXT_PLAIN)
            .body(mail_body(job, fire, runs));
        let result = match message {
            Ok(m) => mail
                .relay
                .send(m)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = &result {
            tracing::warn!(target = %to, error = %e, "e-mail alarm failed");
        }
        result.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_by_host() {
        assert_eq!(
            Shape::of("https://oapi.dingtalk.com/robot/send?access_token=x"),
            Shape::DingTalk
        );
        assert_eq!(
            Shape::of("https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x"),
            Shape::WeCom
        );
        assert_eq!(
            Shape::of("https://open.feishu.cn/open-apis/bot/v2/hook/x"),
            Shape::Feishu
        );
        assert_eq!(
            Shape::of("https://hooks.slack.com/services/x"),
            Shape::Slack
        );
        assert_eq!(Shape::of("http://127.0.0.1:9/alarm"), Shape::Generic);
    }

    #[test]
    fn targets_are_urls_or_addresses() {
        let t =
            parse_targets(" https://hooks.slack.com/services/x , ops@example.com,mailto:a@b.org,")
                .unwrap();
        assert_eq!(
            t,
            vec![
                Target::Webhook("https://hooks.slack.com/services/x".into()),
                Target::Email("ops@example.com".parse().unwrap()),
                Target::Email("a@b.org".parse().unwrap()),
            ]
        );
        assert_eq!(parse_targets("").unwrap(), vec![]);
        let err = parse_targets("ops@example.com, pager").unwrap_err();
        assert!(err.to_string().contains("\"pager\""), "{err}");
        assert!(parse_targets("a@@b").is_err());
        assert!(parse_targets("http://").is_err());
    }
}
