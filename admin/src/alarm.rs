//! Alarms for failed fires: webhooks in the generic JSON shape or the DingTalk, WeCom, Feishu and
//! Slack shapes, chosen by the target URL. Sent once per failed fire, after its retries.

use serde_json::{json, Value};

use crate::config::Settings;
use crate::model::{Fire, Job, Run};

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

/// The one-paragraph text of an alarm.
pub fn text(job: &Job, fire: &Fire, runs: &[Run]) -> String {
    let failed: Vec<String> = runs
        .iter()
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
        .collect();
    format!(
        "Shardline: job {} \"{}\" fire {} failed (planned at {} ms, trigger {}). {}",
        job.id,
        job.name,
        fire.id,
        fire.planned_at,
        fire.trigger_type,
        failed.join("; ")
    )
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

/// Sends the alarm of a failed fire to every webhook target of the job. Targets that are not
/// URLs (e-mail addresses) are logged: e-mail delivery needs an SMTP relay, which this admin does
/// not configure.
pub async fn send(
    http: &reqwest::Client,
    settings: &Settings,
    job: &Job,
    fire: &Fire,
    runs: &[Run],
) {
    tracing::warn!(
        job_id = job.id,
        fire_id = fire.id,
        "{}",
        text(job, fire, runs)
    );
    for target in job
        .alarm_targets
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        if target.starts_with("http://") || target.starts_with("https://") {
            let result = http
                .post(target)
                .timeout(settings.dispatch_timeout())
                .json(&body(Shape::of(target), job, fire, runs))
                .send()
                .await;
            match result {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => tracing::warn!(target, status = %r.status(), "alarm webhook refused"),
                Err(e) => tracing::warn!(target, error = %e, "alarm webhook failed"),
            }
        } else {
            tracing::warn!(
                target,
                "alarm target is not a webhook URL; e-mail alarms are not sent"
            );
        }
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
}
