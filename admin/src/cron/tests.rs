use super::*;

#[test]
fn smoke() {
    let e = CronExpr::parse("0 30 2 * * ?").unwrap();
    assert!(e.next_after(0, Tz::UTC).is_some());
}
