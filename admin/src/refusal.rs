//! Why a request was refused, as a code and the values in its text. The API returns the English
//! text made here together with the code and the values (`{"code": "between", "params": {...}}`),
//! so that the console can say it in its own language (`web/i18n.js`, keys `api.<code>`; see
//! `crate::coded`).

use crate::coded::{catalogue, Coded};

catalogue! {
    /// One kind of refusal; its English text names its values in braces.
    Reason {
        Required "required" => "is required",
        Chars "chars" => "must be 1 to {max} characters",
        AtMostChars "at_most_chars" => "must be at most {max} characters",
        AtMostBytes "at_most_bytes" => "must be at most {max} bytes, got {got}",
        Between "between" => "must be between {lo} and {hi}, got {got}",
        AtLeast "at_least" => "must be at least {min}",
        OneOf "one_of" => "unknown value {value}; expected one of: {choices}",
        NotUrl "not_url" => "{value} is not an http(s) URL",
        BadUrl "bad_url" => "{value} is not a valid URL: {detail}",
        NotAlarmTarget "not_alarm_target" => "{value} is neither an http(s) URL nor an e-mail address",
        NotJobId "not_job_id" => "{value} is not a job id",
        NoSuchGroup "no_such_group" => "group {id} does not exist",
        NoSuchJob "no_such_job" => "job {id} does not exist",
        JobNotInGroup "job_not_in_group" => "job {job} is not in group {group}",
        JobNotFound "job_not_found" => "job not found",
        GroupNotFound "group_not_found" => "group not found",
        UserNotFound "user_not_found" => "user not found",
        TokenNotFound "token_not_found" => "token not found",
        FireNotFound "fire_not_found" => "fire not found",
        RunNotFound "run_not_found" => "run not found",
        UnknownTimeZone "unknown_time_zone" => "unknown time zone '{value}'",
        UnknownLanguage "unknown_language" => "unknown language '{value}': use en or zh",
        Cron "cron" => "{detail} (at position {pos})",
        WholeSeconds "whole_seconds" => "{type} needs a whole number of seconds, got {value}",
        SecondsRange "seconds_range" => "{type} seconds must be between 1 and 31536000, got {got}",
        NeverFires "never_fires" => "a NONE job never fires by itself; trigger it instead",
        NeverFiresAgain "never_fires_again" => "this schedule never fires again",
        Generation "generation" => "must be CLASSIC (XXL-JOB ≤ 3.4, /run) or V35 (/trigger)",
        GroovyUnsupported "groovy_unsupported" => "GLUE_GROOVY (Java source) cannot run on Shardline executors",
        HandlerNeeded "handler_needed" => "a BEAN job needs a handler name",
        SourceNeeded "source_needed" => "a script job needs its source",
        OwnChild "own_child" => "a job cannot be its own child",
        ItemParamsNeedItems "item_params_need_items" => "item parameters need sharding_mode ITEMS",
        ItemParam "item_param" => "item parameter {piece}: {detail}",
        OnlyItemsAssigned "only_items_assigned" => "only ITEMS jobs have an item assignment",
        TotalChangesRouting "total_changes_routing" => "sharding_total: changing it from {from} to {to} changes MOD(id, N) routing and invalidates the job's {n} checkpoint(s); send \"reset_checkpoints\": true to change it and clear them",
        NoAddressGiven "no_address_given" => "must name at least one executor when given",
        ShardTotal "shard_total" => "total must be between 1 and 100000, got {got}",
        ShardIndex "shard_index" => "index {index} must be in 0..{total}",
        FireExists "fire_exists" => "this fire already exists",
        OneClearCut "one_clear_cut" => "give exactly one of older_than_days, keep_newest and all: true",
        NothingToRetry "nothing_to_retry" => "no failed item to retry: every item succeeded or is still running",
        NeverSent "never_sent" => "this run was never sent to an executor, so it has no log",
        LogUnreadable "log_unreadable" => "cannot read the log from the executor: {detail}",
        AlreadyFinished "already_finished" => "run {id} already finished ({state})",
        Username "username" => "must be 1 to 64 letters, digits or '-_.@'",
        TooManyGroups "too_many_groups" => "too many groups",
        Unchangeable "unchangeable" => "cannot be changed",
        PasswordEndpoint "password_endpoint" => "use POST /api/v1/users/{id}/password",
        PasswordShort "password_short" => "password must be at least {min} characters",
        OwnAdminRole "own_admin_role" => "you cannot remove your own ADMIN role",
        DeleteSelf "delete_self" => "you cannot delete yourself",
        AppnameChars "appname_chars" => "may contain only letters, digits, '-', '_' and '.'",
        AppnameUsed "appname_used" => "appname {value} is already used",
        UserExists "user_exists" => "user {value} already exists",
        GroupHasJobs "group_has_jobs" => "group {id} still has {jobs} job(s); delete or move them first",
        ManualNeedsAddress "manual_needs_address" => "a MANUAL group needs at least one address",
        AdminOnly "admin_only" => "this needs the ADMIN role",
        NoGroupPermission "no_group_permission" => "no permission on group {id}",
    }
}

/// A reason with its values; its `Display` is the English text.
pub type Refusal = Coded<Reason>;

impl Refusal {
    /// `value` is none of `choices`.
    pub fn one_of(value: &str, choices: &[&str]) -> Refusal {
        Refusal::new(Reason::OneOf)
            .with("value", format_args!("{value:?}"))
            .with("choices", choices.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_english_text_has_the_values_filled_in() {
        let r = Refusal::new(Reason::Between)
            .with("lo", 0)
            .with("hi", 100)
            .with("got", 101);
        assert_eq!(r.to_string(), "must be between 0 and 100, got 101");
        assert_eq!(
            Refusal::one_of("X", &["A", "B"]).to_string(),
            "unknown value \"X\"; expected one of: A, B"
        );
        // A value given for none of the braces is ignored; a brace with no value stays as it is.
        assert_eq!(
            Refusal::new(Reason::Chars).with("other", 1).to_string(),
            "must be 1 to {max} characters"
        );
    }
}
