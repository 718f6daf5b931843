import Foundation
import OutpostStorage

// Hooks for the crash tests, compiled into debug builds only (OUTPOST_FAULTS is defined for the
// debug configuration in Package.swift): a release `outpost` reads neither variable, and no
// library reads the environment for them.

/// The fault points of this process: `OUTPOST_FAULT=point:fail|kill|stop[,…]` (docs/sync.md).
let processFaults: FaultInjector = {
    #if OUTPOST_FAULTS
        FaultInjector(specification: ProcessInfo.processInfo.environment["OUTPOST_FAULT"] ?? "")
    #else
        FaultInjector()
    #endif
}()

/// `OUTPOST_TILE_CHECKPOINT_MS`: the least time between tile-export checkpoints (nil: the default).
let testCheckpointInterval: Duration? = {
    #if OUTPOST_FAULTS
        ProcessInfo.processInfo.environment["OUTPOST_TILE_CHECKPOINT_MS"].flatMap(Int.init).map { .milliseconds(max(0, $0)) }
    #else
        nil
    #endif
}()
