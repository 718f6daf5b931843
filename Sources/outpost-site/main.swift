import Foundation
import OutpostLoadTesting

// The crews' side of a site run (SiteLab), started on the crews' network namespace by the site
// test and by `outpost-bench site`. Not for users: it writes a service and drives load.
exit(await SiteLab.driverMain(Array(CommandLine.arguments.dropFirst())))
