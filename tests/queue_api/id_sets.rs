//! The audit trail's id sets (`IdSet`): minimal sorted runs that answer membership, and
//! stored runs that break the invariants refused.

use deadletter::audit::IdSet;

#[test]
fn runs_are_minimal_and_answer_membership() {
    let set = IdSet::of(&[9, 3, 4, 5, 5, 7, 8, 20]);
    assert_eq!(set.runs(), &[(3, 3), (7, 3), (20, 1)]);
    assert_eq!(set.len(), 7);
    assert_eq!(set.iter().collect::<Vec<_>>(), [3, 4, 5, 7, 8, 9, 20]);
    for id in 0..25 {
        assert_eq!(
            set.contains(id),
            [3, 4, 5, 7, 8, 9, 20].contains(&id),
            "{id}"
        );
    }
    assert!(IdSet::of(&[]).is_empty());
}

#[test]
fn stored_runs_that_break_the_invariants_are_refused() {
    assert!(IdSet::from_runs(vec![(1, 2), (5, 1)]).is_some());
    assert!(IdSet::from_runs(vec![(1, 0)]).is_none());
    assert!(IdSet::from_runs(vec![(5, 1), (1, 1)]).is_none());
    assert!(IdSet::from_runs(vec![(1, 2), (3, 1)]).is_none());
    assert!(IdSet::from_runs(vec![(u64::MAX, 2)]).is_none());
}
