import Foundation

// outpost-fuzz <target> [libFuzzer options and corpus directories]: runs libFuzzer on one parser
// (Targets.swift). outpost-fuzz seeds <directory>: writes the seed inputs of every target.
// outpost-fuzz list: the targets' names.

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The target libFuzzer drives (set once, before the driver starts).
nonisolated(unsafe) var selected: FuzzTarget?

/// libFuzzer's entry point: one input to the selected target.
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let selected else { return 0 }
    selected.run(data.map { Data(bytes: $0, count: size) } ?? Data())
    return 0
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: outpost-fuzz <\(FuzzTarget.all.map(\.name).joined(separator: "|"))> [libFuzzer options] [corpus…]\n       outpost-fuzz seeds <directory>\n".utf8))
    exit(2)
}
if arguments[1] == "list" {
    print(FuzzTarget.all.map(\.name).joined(separator: "\n"))
    exit(0)
}
if arguments[1] == "seeds" {
    guard arguments.count == 3 else { exit(2) }
    try FuzzTarget.writeSeeds(to: URL(fileURLWithPath: arguments[2]))
    exit(0)
}
guard let target = FuzzTarget.all.first(where: { $0.name == arguments[1] }) else {
    FileHandle.standardError.write(Data("outpost-fuzz: no target \(arguments[1])\n".utf8))
    exit(2)
}
selected = target
// libFuzzer sees the program name and everything after the target's name.
var argc = CommandLine.argc - 1
var argv = CommandLine.unsafeArgv.advanced(by: 1)
argv[0] = CommandLine.unsafeArgv[0]
exit(LLVMFuzzerRunDriver(&argc, &argv, { testOneInput($0, $1) }))
