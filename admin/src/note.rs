//! The messages the admin itself writes on fires and runs (why a run was lost, why a fire was
//! skipped, what an executor answered), as a code and the values in them. The row keeps the
//! English text in its message column, for the API and for alarms, and the note beside it
//! (`{"code": ..., "params": {...}}`, see `crate::coded`), so that the console says it in its own
//! language (`web/i18n.js`, keys `note.<code>`). The codes are stored: never rename one.
//! Messages that are not the admin's own (an executor's result, a probe log) have no note.

use crate::coded::{catalogue, Coded};

catalogue! {
    /// One kind of message the admin writes on a fire or a run.
    NoteKind {
        AcceptedBy "accepted_by" => "accepted by {address}",
        RefusedBy "refused_by" => "refused by {address}: {detail}",
        ConnectionRefused "connection_refused" => "{url}: connection refused ({detail})",
        TimedOut "timed_out" => "{url}: timed out ({detail})",
        RequestFailed "request_failed" => "{url}: request failed ({detail})",
        HttpStatus "http_status" => "{url}: HTTP {status}: {body}",
        NotEnvelope "not_envelope" => "{url}: answer is not a protocol envelope ({detail}): {body}",
        BatchAnswers "batch_answers" => "{url}: {got} answers for a batch of {runs} runs",
        CannotEncode "cannot_encode" => "cannot encode the run request: {detail}",
        NoExecutor "no_executor" => "no online executor in the group",
        ProbesFailed "probes_failed" => "no executor passed the probe:\n{log}",
        MaxNode "max_node" => "maxNode={max}: {max} of {count} executors called",
        Retrying "retrying" => "retrying {count} item(s) in {ms} ms",
        MisfireSuperseded "misfire_superseded" => "misfired: superseded by a later missed fire",
        MisfireLate "misfire_late" => "misfired: more than {ms} ms late when due (DO_NOTHING)",
        JobDeleted "job_deleted" => "job deleted",
        JobStopped "job_stopped" => "job stopped",
        LostNoAnswer "lost_no_answer" => "lost: executor {address} stopped answering",
        LostEvicted "lost_evicted" => "lost: executor {address} was evicted (no heartbeat)",
        LostAdminClaimed "lost_admin_claimed" => "lost: admin {owner} stopped after claiming its late send, with no answer recorded, and executor {address} is not running the job",
        LostAdminUnsent "lost_admin_unsent" => "lost: admin {owner} stopped before recording its send, and executor {address} is not running the job",
        LostTimeout "lost_timeout" => "lost: no result {margin} s after its {timeout} s timeout",
        Killed "killed" => "killed from the admin: {detail}",
        KillFailed "kill_failed" => "killed from the admin: kill request failed ({detail}); marked killed here",
    }
}

/// A message with its values; its `Display` is the English text.
pub type Note = Coded<NoteKind>;

/// Longest note kept. A longer one (an executor's answer of pages) is left out: the console then
/// shows the English text, which the row keeps as it keeps any message.
const STORED_MAX_BYTES: usize = 16_000;

impl Note {
    /// The note as the store keeps it; `None` if it is too long to keep.
    pub fn stored(&self) -> Option<String> {
        Some(self.to_json().to_string()).filter(|j| j.len() <= STORED_MAX_BYTES)
    }
}

/// How a stored note appears in the API: the JSON object itself, not a string holding it.
/// A note that is not valid JSON (never written by the admin) shows as null.
pub fn serialize_stored<S: serde::Serializer>(
    stored: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    stored
        .as_deref()
        .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
        .serialize(s)
}

/// A message to store: its English text and, when the admin wrote it, its note as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub note: Option<String>,
}

impl Message {
    /// Words that are not the admin's own (an executor's answer, a probe log): no note.
    pub fn words(text: impl Into<String>) -> Message {
        Message {
            text: text.into(),
            note: None,
        }
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::words(text)
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message::words(text)
    }
}

impl From<Note> for Message {
    fn from(n: Note) -> Message {
        Message {
            text: n.to_string(),
            note: n.stored(),
        }
    }
}

impl From<NoteKind> for Message {
    fn from(k: NoteKind) -> Message {
        Note::new(k).into()
    }
}

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}
