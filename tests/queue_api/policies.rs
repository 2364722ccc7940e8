//! The pool's policies through their public API: the classifier's rules (which failures
//! converted from errors are permanent) and the retry policy's delays.

use std::time::Duration;

use deadletter::pool::{Classifier, FailureClass, Retry};
use deadletter::Failure;

#[derive(Debug)]
struct Busy;
impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("busy")
    }
}
impl std::error::Error for Busy {}

#[test]
fn unknown_errors_stay_transient() {
    let failure = Failure::from(Busy);
    assert_eq!(failure.kind, "Busy");
    assert_eq!(
        Classifier::new().class_of(&failure),
        FailureClass::Transient
    );
    let other = Classifier::new().permanent::<std::num::ParseIntError>();
    assert_eq!(other.class_of(&failure), FailureClass::Transient);
}

#[test]
fn a_type_rule_makes_converted_errors_permanent() {
    let parse = "x".parse::<u32>().unwrap_err();
    let failure = Failure::from(parse);
    assert_eq!(failure.kind, "ParseIntError");
    let c = Classifier::new().permanent::<std::num::ParseIntError>();
    assert!(c.apply(failure).is_permanent());
}

#[test]
fn kind_rules_and_the_first_match_decides() {
    let c = Classifier::new().transient::<Busy>().permanent_kind("Busy");
    assert_eq!(c.class_of(&Failure::from(Busy)), FailureClass::Transient);
    let c = Classifier::new().permanent_kind("Busy");
    assert_eq!(c.class_of(&Failure::from(Busy)), FailureClass::Permanent);
}

#[test]
fn failures_built_by_the_handler_keep_their_class() {
    let c = Classifier::new()
        .permanent_kind("Busy")
        .transient_kind("Bad");
    assert_eq!(
        c.class_of(&Failure::transient("Busy", "x")),
        FailureClass::Transient
    );
    assert_eq!(
        c.class_of(&Failure::permanent("Bad", "x")),
        FailureClass::Permanent
    );
}

#[test]
fn a_payload_that_does_not_decode_is_permanent() {
    let failure = Failure::from(deadletter::Error::Codec("unexpected end".into()));
    assert!(failure.is_permanent());
    assert_eq!(failure.kind, "DecodeError");
    // A rule can still send it back to retries.
    let c = Classifier::new().transient::<deadletter::Error>();
    assert_eq!(c.class_of(&failure), FailureClass::Transient);
    // Other errors of the crate stay transient.
    let io = Failure::from(deadletter::Error::Poisoned);
    assert_eq!(io.class, FailureClass::Transient);
}

#[test]
fn shapes_and_cap() {
    let ms = Duration::from_millis;
    let e = Retry::exponential(ms(100)).no_jitter().cap(ms(1000));
    assert_eq!(
        (1..=6).map(|a| e.delay(a)).collect::<Vec<_>>(),
        vec![ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
    );
    let l = Retry::linear(ms(100)).no_jitter();
    assert_eq!(l.delay(3), ms(300));
    let f = Retry::fixed(ms(50)).no_jitter();
    assert_eq!(f.delay(9), ms(50));
    assert_eq!(
        Retry::exponential(ms(1)).no_jitter().delay(200),
        Duration::from_secs(300)
    );
}

#[test]
fn full_jitter_stays_within_the_delay() {
    let r = Retry::exponential(Duration::from_millis(100));
    let mut seen_small = false;
    for _ in 0..1000 {
        let d = r.delay(3);
        assert!(d <= Duration::from_millis(400));
        seen_small |= d < Duration::from_millis(200);
    }
    assert!(seen_small, "jitter never went below half the delay");
}
