import Foundation

// The driver both fuzz executables share:
//   <executable> <target> [libFuzzer options and corpus directories]   fuzz one parser
//   <executable> seeds <directory>                                      write every target's seeds
//   <executable> list                                                   the targets' names

/// One parser of input Outpost did not write, as libFuzzer drives it: any bytes in, an answer or
/// a thrown error out; a crash, a hang, a leak or an unbounded allocation is a finding.
public struct FuzzTarget: Sendable {
    public let name: String
    public let run: @Sendable (Data) -> Void
    /// Seed inputs: valid examples the fuzzer mutates from.
    public let seeds: @Sendable () throws -> [Data]

    public init(name: String, run: @escaping @Sendable (Data) -> Void, seeds: @escaping @Sendable () throws -> [Data]) {
        self.name = name
        self.run = run
        self.seeds = seeds
    }
}

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

/// Runs the command line over `targets`.
public func runFuzzer(targets: [FuzzTarget]) throws -> Never {
    let arguments = CommandLine.arguments
    guard arguments.count >= 2 else {
        FileHandle.standardError.write(Data("usage: \(arguments[0]) <\(targets.map(\.name).joined(separator: "|"))> [libFuzzer options] [corpus…] | seeds <directory> | list\n".utf8))
        exit(2)
    }
    switch arguments[1] {
    case "list":
        print(targets.map(\.name).joined(separator: "\n"))
        exit(0)
    case "seeds":
        guard arguments.count == 3 else { exit(2) }
        for target in targets {
            let folder = URL(fileURLWithPath: arguments[2]).appendingPathComponent(target.name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for (index, seed) in try target.seeds().enumerated() {
                try seed.write(to: folder.appendingPathComponent(String(format: "seed-%03d", index)))
            }
        }
        exit(0)
    default:
        guard let target = targets.first(where: { $0.name == arguments[1] }) else {
            FileHandle.standardError.write(Data("\(arguments[0]): no target \(arguments[1])\n".utf8))
            exit(2)
        }
        selected = target
        // libFuzzer sees the program name and everything after the target's name.
        var argc = CommandLine.argc - 1
        var argv = CommandLine.unsafeArgv.advanced(by: 1)
        argv[0] = CommandLine.unsafeArgv[0]
        exit(LLVMFuzzerRunDriver(&argc, &argv, { testOneInput($0, $1) }))
    }
}
