//! Our cron engine against the real Quartz 2.3 `CronExpression`.
//!
//! `fixtures/cron/oracle.tsv` holds Quartz's answers for a large random sample (see
//! `fixtures/cron/gen.rs`); every line must agree: the same fire times for expressions Quartz
//! accepts, a refusal for those it refuses. When Java and Debian's `libquartz2-java` are
//! installed, a fresh random sample is also compared live.
//!
//! Regenerate the fixture (needs Java and the oracle):
//! `cargo test -p shardline-admin --test cron_oracle regenerate_fixture -- --ignored`

#[path = "fixtures/cron/gen.rs"]
mod gen;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use shardline_admin::cron::{parse_tz, CronExpr};

use gen::Case;

const FIXTURE: &str = "tests/fixtures/cron/oracle.tsv";
const FIXTURE_SEED: u64 = 20_261_130;
const DEFAULT_ORACLE: &str = "/work/shared/tools/quartz-oracle/run";

/// What Quartz said about one case.
enum Answer {
    Fires(Vec<i64>),
    Invalid(String),
}

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

/// Our answer compared with Quartz's; a description of the difference, if any.
///
/// Quartz looks for fire times up to a hundred years after the current year, so a schedule that
/// ends (fewer times than asked) may gain times past that horizon as years go by. `horizon_year`
/// is the last year Quartz searched when it answered; our times after it are not compared.
fn disagreement(case: &Case, answer: &Answer, horizon_year: Option<i32>) -> Option<String> {
    let tz = match parse_tz(case.zone) {
        Ok(tz) => tz,
        Err(e) => return Some(e.to_string()),
    };
    let ours = CronExpr::parse(&case.expr);
    match (answer, ours) {
        (Answer::Fires(times), Ok(expr)) => {
            let mut got = expr.upcoming(case.start_ms, tz, case.count);
            if let Some(year) = horizon_year.filter(|_| times.len() < case.count) {
                let end = chrono::NaiveDate::from_ymd_opt(year + 1, 1, 1)
                    .expect("valid year")
                    .and_hms_opt(0, 0, 0)
                    .expect("valid time")
                    .and_utc()
                    .timestamp_millis();
                // Zones are at most a day away from UTC.
                got.retain(|&t| t < end - 86_400_000 || times.contains(&t));
            }
            (&got != times).then(|| format!("Quartz fires at {times:?}, we at {got:?}"))
        }
        (Answer::Fires(_), Err(e)) => Some(format!("Quartz accepts it, we refuse: {e}")),
        (Answer::Invalid(msg), Ok(_)) => Some(format!("Quartz refuses it ({msg}), we accept it")),
        (Answer::Invalid(_), Err(_)) => None,
    }
}

fn parse_answer(status: &str, payload: &str) -> Result<Answer, String> {
    match status {
        "ok" if payload.is_empty() => Ok(Answer::Fires(Vec::new())),
        "ok" => payload
            .split(',')
            .map(|t| t.parse::<i64>().map_err(|e| format!("bad time '{t}': {e}")))
            .collect::<Result<_, _>>()
            .map(Answer::Fires),
        "invalid" => Ok(Answer::Invalid(payload.to_string())),
        other => Err(format!("unknown status '{other}'")),
    }
}

/// The disagreements among `results`.
fn compare(results: &[(Case, Answer)], horizon_year: Option<i32>) -> Vec<String> {
    results
        .iter()
        .filter_map(|(case, answer)| {
            disagreement(case, answer, horizon_year)
                .map(|d| format!("{}  ->  {d}", case.oracle_line()))
        })
        .collect()
}

/// The fixture header line naming the year it was generated in.
const GENERATED_IN: &str = "# generated in ";

fn report(what: &str, total: usize, disagreements: &[String]) {
    for d in disagreements.iter().take(25) {
        eprintln!("{d}");
    }
    assert!(
        disagreements.is_empty(),
        "{what}: {} of {total} cases disagree with Quartz",
        disagreements.len()
    );
}

#[test]
fn fixture_agrees_with_quartz() {
    let text = std::fs::read_to_string(fixture_path()).expect("fixture oracle.tsv is readable");
    let mut results = Vec::new();
    let mut generated_in = None;
    for (n, line) in text.lines().enumerate() {
        if let Some(year) = line.strip_prefix(GENERATED_IN) {
            generated_in = Some(year.trim().parse::<i32>().expect("a year"));
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(
            f.len(),
            6,
            "line {}: expected 6 tab-separated fields",
            n + 1
        );
        let zone = gen::ZONES
            .iter()
            .find(|z| **z == f[2])
            .unwrap_or_else(|| panic!("line {}: unexpected zone {}", n + 1, f[2]));
        let case = Case {
            expr: f[0].to_string(),
            start_ms: f[1].parse().expect("start is a number"),
            zone,
            count: f[3].parse().expect("count is a number"),
        };
        let answer = parse_answer(f[4], f[5]).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        results.push((case, answer));
    }
    assert!(
        results.len() >= 8_000,
        "the fixture should hold a large sample"
    );
    let accepted = results
        .iter()
        .filter(|(_, a)| matches!(a, Answer::Fires(_)))
        .count();
    assert!(
        accepted > results.len() / 2 && accepted < results.len(),
        "both kinds are present"
    );
    let generated_in = generated_in.expect("the fixture header names the year it was generated in");
    let disagreements = compare(&results, Some(generated_in + 100));
    report("fixture", results.len(), &disagreements);
}

/// The oracle's `run` script, when Java and Quartz are installed here.
fn usable_oracle() -> Result<PathBuf, String> {
    let run =
        std::env::var("SHARDLINE_QUARTZ_ORACLE").unwrap_or_else(|_| DEFAULT_ORACLE.to_string());
    let run = PathBuf::from(run);
    if !run.exists() {
        return Err(format!("{} not found", run.display()));
    }
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(java, Ok(s) if s.success()) {
        return Err("no java on PATH".to_string());
    }
    // `run` would try to install the package from the network otherwise.
    if !Path::new("/usr/share/java/quartz2.jar").exists() {
        return Err("libquartz2-java is not installed".to_string());
    }
    Ok(run)
}

/// Runs the oracle on `cases`, in order.
fn ask_quartz(run: &Path, cases: &[Case]) -> Result<Vec<Answer>, String> {
    let mut input = String::new();
    for c in cases {
        input.push_str(&c.oracle_line());
        input.push('\n');
    }
    let mut child = Command::new(run)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the oracle: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("oracle failed: {e}"))?;
    writer
        .join()
        .map_err(|_| "writer panicked".to_string())?
        .map_err(|e| format!("cannot write to the oracle: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "oracle exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let stdout = String::from_utf8(output.stdout).map_err(|e| e.to_string())?;
    let lines: Vec<&str> = stdout.lines().collect();
    if lines.len() != cases.len() {
        return Err(format!(
            "oracle answered {} lines for {} cases",
            lines.len(),
            cases.len()
        ));
    }
    cases
        .iter()
        .zip(lines)
        .map(|(case, line)| {
            let f: Vec<&str> = line.splitn(3, '\t').collect();
            if f.len() != 3 || f[0] != case.expr {
                return Err(format!(
                    "unexpected oracle line '{line}' for '{}'",
                    case.expr
                ));
            }
            parse_answer(f[1], f[2])
        })
        .collect()
}

#[test]
fn live_sample_agrees_with_quartz() {
    let run = match usable_oracle() {
        Ok(run) => run,
        Err(why) => {
            eprintln!("note: skipping the live Quartz comparison: {why}");
            return;
        }
    };
    let seed = std::env::var("SHARDLINE_CRON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("live Quartz comparison with SHARDLINE_CRON_SEED={seed}");
    let cases = gen::cases(seed, 400, 2, 100);
    let answers = match ask_quartz(&run, &cases) {
        Ok(a) => a,
        Err(why) => {
            eprintln!("note: skipping the live Quartz comparison: {why}");
            return;
        }
    };
    let results: Vec<(Case, Answer)> = cases.into_iter().zip(answers).collect();
    // Quartz runs on the same clock as we do, so its search horizon is ours.
    let disagreements = compare(&results, None);
    report("live sample", results.len(), &disagreements);
}

#[test]
#[ignore = "rewrites the fixture from the Quartz oracle; needs Java"]
fn regenerate_fixture() {
    let run = usable_oracle().expect("the Quartz oracle is needed to regenerate the fixture");
    let cases = gen::cases(FIXTURE_SEED, 2_500, 4, 700);
    let answers = ask_quartz(&run, &cases).expect("oracle answers");
    let mut out = String::new();
    out.push_str("# Next fire times from Quartz 2.3 CronExpression (tests/fixtures/cron/gen.rs,\n");
    out.push_str(&format!(
        "# seed {FIXTURE_SEED}); regenerate with the ignored test regenerate_fixture.\n"
    ));
    out.push_str(
        "# EXPR<TAB>START_MS<TAB>ZONE<TAB>COUNT<TAB>ok|invalid<TAB>times or Quartz's message\n",
    );
    let year = chrono::Datelike::year(&chrono::Utc::now().date_naive());
    out.push_str(&format!("{GENERATED_IN}{year}\n"));
    for (case, answer) in cases.iter().zip(&answers) {
        let (status, payload) = match answer {
            Answer::Fires(t) => (
                "ok",
                t.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Answer::Invalid(m) => ("invalid", m.clone()),
        };
        out.push_str(&format!("{}\t{status}\t{payload}\n", case.oracle_line()));
    }
    std::fs::write(fixture_path(), out).expect("fixture written");
}
