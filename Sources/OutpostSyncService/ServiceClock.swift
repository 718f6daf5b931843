import OutpostCore

/// Where a service's stores and job records read the time: replicas' creation and last sync,
/// job updates, result retention, conflict time stamps. OutpostCore's `WallClock`: `.system`
/// reads the wall clock, and a test may hand a store or a job store a clock of its own.
public typealias ServiceClock = WallClock
